package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kray-project/kray/pkg/ray"
)

// Ray's defaults for the ports `ray start` opens.
const (
	defaultGCSPort       = "6379"
	defaultDashboardPort = "8265"
	defaultAgentPort     = "52365"
)

// The GCS methods the fake serves: the health check of `ray health-check` (Ray's gcs_utils.check_health) and
// the autoscaler state service kray drains nodes with.
const (
	methodCheckAliveHeartbeat = "/ray.rpc.HeartbeatInfoGcsService/CheckAlive"
	methodCheckAliveNodeInfo  = "/ray.rpc.NodeInfoGcsService/CheckAlive"
)

// exitSIGTERM is how `ray start` ends on SIGTERM: Ray's CLI installs no handler for it, so its shell sees a
// process killed by the signal (128+15), and a kubelet that stops the container records a failure.
const exitSIGTERM = 128 + 15

// start runs `ray start`: the head's servers or a worker's, until SIGTERM or SIGINT.
func start(f flags) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errs := make(chan error, 3)
	if f.values["head"] == "true" {
		gcs, err := net.Listen("tcp", ":"+f.get("port", defaultGCSPort))
		if err != nil {
			return fail(err)
		}
		server := grpc.NewServer(grpc.ForceServerCodec(ray.RawCodec{}), grpc.UnknownServiceHandler(gcsHandler))
		go func() { errs <- server.Serve(gcs) }()
		defer server.Stop()
		d := newDashboard()
		go func() { errs <- serve(ctx, ":"+f.get("dashboard-port", defaultDashboardPort), d) }()
		fmt.Println("Ray runtime started (fake head).")
	} else {
		address := f.get("address", "")
		if address == "" {
			return fail(fmt.Errorf("ray start needs --head or --address"))
		}
		// A raylet registers with the GCS before it serves: wait for the head.
		for !checkAlive(ctx, address) {
			select {
			case <-ctx.Done():
				return exitSIGTERM
			case <-time.After(time.Second):
			}
		}
		fmt.Printf("Ray runtime started (fake worker of %s).\n", address)
	}
	go func() { errs <- serve(ctx, ":"+f.get("dashboard-agent-listen-port", defaultAgentPort), agent{}) }()
	select {
	case <-ctx.Done():
		return exitSIGTERM
	case err := <-errs:
		return fail(err)
	}
}

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "ray: %v\n", err)
	return 1
}

// serve runs h on addr until ctx ends.
func serve(ctx context.Context, addr string, h http.Handler) error {
	s := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = s.Close()
	}()
	if err := s.ListenAndServe(); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// gcsHandler answers the GCS calls the fake knows with Ray's empty (default) replies: alive, no nodes, and
// every drain accepted. Any other method is Unimplemented, as on a GCS without that service.
func gcsHandler(_ any, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	var req []byte
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	switch method {
	case methodCheckAliveHeartbeat, methodCheckAliveNodeInfo:
		return stream.SendMsg([]byte{})
	case ray.MethodGetClusterResourceState:
		return stream.SendMsg(ray.EncodeNodes(nil))
	case ray.MethodDrainNode:
		return stream.SendMsg(ray.EncodeDrainReply(ray.DrainReply{Accepted: true}))
	}
	return status.Errorf(codes.Unimplemented, "unknown method %s", method)
}

// checkAlive reports whether the GCS at address answers its health check within two seconds.
func checkAlive(ctx context.Context, address string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(address, grpc.WithDefaultCallOptions(grpc.ForceCodec(ray.RawCodec{})),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return false
	}
	defer conn.Close()
	var reply []byte
	return conn.Invoke(ctx, methodCheckAliveHeartbeat, []byte{}, &reply) == nil
}

// healthCheck runs `ray health-check --address HOST:PORT`: exit 0 when the GCS answers.
func healthCheck(f flags) int {
	address := f.get("address", os.Getenv("RAY_ADDRESS"))
	if address == "" {
		return fail(fmt.Errorf("health-check needs --address"))
	}
	if !checkAlive(context.Background(), address) {
		fmt.Fprintf(os.Stderr, "ray: the GCS at %s does not answer\n", address)
		return 1
	}
	return 0
}

// agent is the dashboard agent's HTTP server on every node: the raylet health kray's probes read.
type agent struct{}

func (agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/local_raylet_healthz", "/api/healthz":
		_, _ = w.Write([]byte("success"))
	default:
		http.NotFound(w, r)
	}
}
