package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kray-project/kray/pkg/ray"
)

// Ray's gcs_rpc_server_reconnect_timeout_s: how long a raylet that lost its GCS keeps retrying before it exits;
// RAY_gcs_rpc_server_reconnect_timeout_s sets it, as Ray's config does.
const (
	defaultGCSReconnectTimeout = 60 * time.Second
	envGCSReconnectTimeout     = "RAY_gcs_rpc_server_reconnect_timeout_s"
)

// raylet is one node's fake raylet: registered with its GCS under a node ID of its own, answering the GCS's
// health checks and DrainRaylet. Drained, it exits once idle, and it never runs work here, so at once.
type raylet struct {
	id         []byte
	gcsAddress string
	address    string
	drained    chan struct{}
}

// startRaylet serves the raylet on port and registers it with the GCS at gcsAddress, under instanceID.
func startRaylet(ctx context.Context, gcsAddress, port, instanceID string, errs chan<- error) (*raylet, error) {
	ip, err := localIP(gcsAddress)
	if err != nil {
		return nil, err
	}
	r := &raylet{id: newNodeID(), gcsAddress: gcsAddress, address: net.JoinHostPort(ip, port), drained: make(chan struct{})}
	lis, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return nil, err
	}
	server := grpc.NewServer(grpc.ForceServerCodec(ray.RawCodec{}), grpc.UnknownServiceHandler(r.handle))
	go func() { errs <- server.Serve(lis) }()
	go func() {
		<-ctx.Done()
		server.Stop()
	}()
	n := &gcsNode{id: r.id, instanceID: instanceID, address: r.address}
	if err := call(ctx, gcsAddress, methodRegisterNode, encodeNode(n)); err != nil {
		return nil, fmt.Errorf("register with the GCS at %s: %w", gcsAddress, err)
	}
	fmt.Printf("Raylet %x registered with the GCS at %s.\n", r.id, gcsAddress)
	return r, nil
}

// handle answers the GCS: its health check, and DrainRaylet.
func (r *raylet) handle(_ any, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	var req []byte
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	switch method {
	case methodHealthCheck:
		return stream.SendMsg(servingReply)
	case methodDrainRaylet:
		select {
		case <-r.drained:
		default:
			close(r.drained)
		}
		return stream.SendMsg([]byte{})
	}
	return status.Errorf(codes.Unimplemented, "unknown method %s", method)
}

// unregister tells the GCS the raylet is going, as a raylet that exits on its own does.
func (r *raylet) unregister() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = call(ctx, r.gcsAddress, methodUnregisterNode, encodeNode(&gcsNode{id: r.id}))
}

// watchGCS returns when the GCS has not answered for the reconnect timeout, or when ctx ends.
func watchGCS(ctx context.Context, gcsAddress string) {
	timeout := defaultGCSReconnectTimeout
	if s, err := strconv.Atoi(os.Getenv(envGCSReconnectTimeout)); err == nil && s > 0 {
		timeout = time.Duration(s) * time.Second
	}
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		if checkAlive(ctx, gcsAddress) {
			last = time.Now()
		} else if time.Since(last) >= timeout {
			return
		}
	}
}

// localIP is the pod IP: the address the pod's hostname resolves to (the kubelet writes it into /etc/hosts),
// else the address this node reaches address from.
func localIP(address string) (string, error) {
	if host, err := os.Hostname(); err == nil {
		if addrs, err := net.LookupHost(host); err == nil {
			for _, a := range addrs {
				if ip := net.ParseIP(a); ip != nil && !ip.IsLoopback() {
					return a, nil
				}
			}
		}
	}
	conn, err := net.Dial("udp", address)
	if err != nil {
		return "", fmt.Errorf("find the pod IP: %w", err)
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).IP.String(), nil
}

// instanceID is the instance ID the raylet registers with: KubeRay's RAY_CLOUD_INSTANCE_ID (the pod name),
// else the host name.
func instanceID() string {
	if id := os.Getenv("RAY_CLOUD_INSTANCE_ID"); id != "" {
		return id
	}
	host, _ := os.Hostname()
	return host
}
