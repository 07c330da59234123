package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
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

// raylet is one node's fake raylet: registered with its GCS under a node ID of its own with its CPUs, answering
// the GCS's health checks and DrainRaylet, and running the task attempts the head pushes to it. Drained, it exits
// once idle (Ray's raylet unregisters and exits 0): at once, or when its last task ends.
type raylet struct {
	id []byte
	// clusterID is the ID of the cluster whose GCS the raylet registered with; its calls carry it.
	clusterID  []byte
	gcsAddress string
	address    string
	cpus       int
	server     *grpc.Server
	mu         sync.Mutex
	gone       bool
	// draining is set by an accepted DrainRaylet; running counts the task attempts running.
	draining bool
	running  int
}

// startRaylet serves the raylet on port and registers it with the GCS at gcsAddress, under instanceID, with
// cpus for tasks.
func startRaylet(ctx context.Context, gcsAddress, port, instanceID string, cpus int, errs chan<- error) (*raylet, error) {
	ip, err := localIP(gcsAddress)
	if err != nil {
		return nil, err
	}
	r := &raylet{id: newNodeID(), gcsAddress: gcsAddress, address: net.JoinHostPort(ip, port), cpus: cpus}
	lis, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return nil, err
	}
	opts, err := serverOptions()
	if err != nil {
		return nil, err
	}
	r.server = grpc.NewServer(append(opts, grpc.ForceServerCodec(ray.RawCodec{}), grpc.UnknownServiceHandler(r.handle))...)
	go func() {
		if err := r.server.Serve(lis); err != nil { // nil once stopped: the drained raylet's exit
			errs <- err
		}
	}()
	go func() {
		<-ctx.Done()
		r.server.Stop()
	}()
	reply, err := callReply(ctx, gcsAddress, ray.MethodGetClusterID, []byte{})
	if err != nil {
		return nil, fmt.Errorf("get the cluster ID of the GCS at %s: %w", gcsAddress, err)
	}
	id, err := ray.DecodeClusterIDReply(reply)
	if err != nil {
		return nil, fmt.Errorf("get the cluster ID of the GCS at %s: %w", gcsAddress, err)
	}
	r.clusterID = id
	n := &gcsNode{id: r.id, instanceID: instanceID, address: r.address, cpus: cpus}
	if err := call(withClusterID(ctx, id), gcsAddress, methodRegisterNode, encodeNode(n)); err != nil {
		return nil, fmt.Errorf("register with the GCS at %s: %w", gcsAddress, err)
	}
	fmt.Printf("Raylet %x registered with the GCS at %s.\n", r.id, gcsAddress)
	return r, nil
}

// handle answers the GCS: its health check, DrainRaylet and the tasks it pushes.
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
		return stream.SendMsg(r.drainRaylet(req))
	case methodPushTask:
		return r.runTask(stream, req)
	}
	return status.Errorf(codes.Unimplemented, "unknown method %s", method)
}

// exit shuts the drained raylet down as Ray's does: it unregisters from the GCS and stops serving.
func (r *raylet) exit() {
	r.mu.Lock()
	if r.gone {
		r.mu.Unlock()
		return
	}
	r.gone = true
	r.mu.Unlock()
	time.Sleep(100 * time.Millisecond) // the DrainRaylet reply goes out first
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = call(ctx, r.gcsAddress, methodUnregisterNode, encodeNode(&gcsNode{id: r.id}))
	r.server.Stop()
	fmt.Fprintf(os.Stderr, "ray: the raylet of node %x exited: drained\n", r.id)
}

// exited reports whether the raylet has shut down.
func (r *raylet) exited() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gone
}

// Ray's raylet_liveness_self_check_interval_ms: how often a raylet asks its GCS whether it still counts it
// alive; RAY_raylet_liveness_self_check_interval_ms sets it.
const (
	defaultSelfCheckInterval = 60 * time.Second
	envSelfCheckInterval     = "RAY_raylet_liveness_self_check_interval_ms"
)

// watchGCS returns why the raylet ends, as Ray's does: its GCS has not answered for the reconnect timeout
// (the GCS client's _Exit), or, at a liveness self-check, the GCS that answers refused the raylet's cluster
// ID (a GCS that restarted without fault tolerance, which knows nothing of the raylet); "" when ctx ends.
func watchGCS(ctx context.Context, r *raylet) string {
	timeout := envDuration(envGCSReconnectTimeout, time.Second, defaultGCSReconnectTimeout)
	interval := envDuration(envSelfCheckInterval, time.Millisecond, defaultSelfCheckInterval)
	last, nextSelfCheck := time.Now(), time.Now().Add(interval)
	for {
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(time.Second):
		}
		switch err := r.checkAlive(ctx); {
		case status.Code(err) == codes.Unauthenticated:
			last = time.Now()
			if !time.Now().Before(nextSelfCheck) {
				return fmt.Sprintf("GCS returned an authentication error: %v", status.Convert(err).Message())
			}
		case err != nil:
			if time.Since(last) >= timeout {
				return fmt.Sprintf("failed to connect to the GCS at %s within %s", r.gcsAddress, timeout)
			}
		default:
			last = time.Now()
		}
		if !time.Now().Before(nextSelfCheck) {
			nextSelfCheck = time.Now().Add(interval)
		}
	}
}

// checkAlive calls the raylet's GCS with the raylet's cluster ID, within two seconds.
func (r *raylet) checkAlive(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(withClusterID(ctx, r.clusterID), 2*time.Second)
	defer cancel()
	return call(ctx, r.gcsAddress, methodCheckAliveNodeInfo, []byte{})
}

// envDuration is the environment variable key as a count of unit, else def.
func envDuration(key string, unit, def time.Duration) time.Duration {
	if n, err := strconv.Atoi(os.Getenv(key)); err == nil && n > 0 {
		return time.Duration(n) * unit
	}
	return def
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
