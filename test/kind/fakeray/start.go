package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"

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

// exitRayletDied is how `ray start --block` ends when one of its Ray processes exits with a code it does not
// expect: a raylet that lost its GCS for good (Ray's _Exit(EXIT_FAILURE)). A drained raylet exits with 0,
// which `ray start --block` expects: it keeps blocking, with no raylet.
const exitRayletDied = 1

// start runs `ray start`: the head's servers or a worker's, until SIGTERM or SIGINT, or until the node's raylet
// fails (its GCS gone for the reconnect timeout). A drained raylet exits, and `ray start` goes on blocking.
func start(f flags) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return startUntil(ctx, f, node{instance: instanceID(), servePort: servePort()})
}

// node is what a node's `ray start` takes from its environment: the instance ID it registers with, and the
// port of its Serve proxy.
type node struct{ instance, servePort string }

// servePort is Serve's HTTP port: RAY_SERVE_DEFAULT_HTTP_PORT, as Ray Serve reads it, else 8000.
func servePort() string {
	if p := os.Getenv("RAY_SERVE_DEFAULT_HTTP_PORT"); p != "" {
		return p
	}
	return defaultServePort
}

// envZombieMarker names a file: a worker whose file does not exist yet creates it and runs as a zombie (ray
// #64349): its container runs, its agent answers that the raylet is not healthy, and it never registers with
// the GCS. The file is kept in a volume, so the container's next run is a worker again.
const envZombieMarker = "FAKERAY_ZOMBIE_MARKER"

// zombie runs a worker as a zombie until ctx ends, when its marker file is new.
func zombie(ctx context.Context, f flags) (int, bool) {
	marker := os.Getenv(envZombieMarker)
	if marker == "" || f.values["head"] == "true" {
		return 0, false
	}
	file, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, false // there already: the worker runs as Ray's does
	}
	_ = file.Close()
	fmt.Println("Ray runtime started (fake zombie worker: it never joins the GCS).")
	go func() {
		_ = listenAndServe(ctx, ":"+f.get("dashboard-agent-listen-port", defaultAgentPort), agent{raylet: &raylet{gone: true}})
	}()
	<-ctx.Done()
	return exitSIGTERM, true
}

// startUntil is start for the node n, ending as a SIGTERM would when ctx ends.
func startUntil(ctx context.Context, f flags, n node) int {
	if code, ok := zombie(ctx, f); ok {
		return code
	}
	errs := make(chan error, 4)
	gcsAddress := f.get("address", "")
	var sv *serve
	var headID atomic.Value
	if f.values["head"] == "true" {
		port := f.get("port", defaultGCSPort)
		lis, err := listenAgain(ctx, ":"+port)
		if err != nil {
			return fail(err)
		}
		g := newGCS()
		if store := redisFromEnv(); store != nil {
			if err := g.recover(ctx, store); err != nil {
				return fail(err)
			}
		}
		sv = &serve{gcs: g, head: func() []byte { return headID.Load().([]byte) }}
		g.serve = sv
		opts, err := serverOptions()
		if err != nil {
			return fail(err)
		}
		server := grpc.NewServer(append(opts, grpc.ForceServerCodec(ray.RawCodec{}), grpc.UnknownServiceHandler(g.handle))...)
		go func() { errs <- server.Serve(lis) }()
		defer server.Stop()
		go g.checkHealth(ctx)
		go g.runTasks(ctx)
		d := newDashboard(sv, g.tasks)
		go func() { errs <- listenAndServe(ctx, ":"+f.get("dashboard-port", defaultDashboardPort), d) }()
		gcsAddress = "127.0.0.1:" + port
		fmt.Println("Ray runtime started (fake head).")
	} else {
		if gcsAddress == "" {
			return fail(fmt.Errorf("ray start needs --head or --address"))
		}
		// A raylet registers with the GCS before it serves: wait for the head.
		for !checkAlive(ctx, gcsAddress) {
			select {
			case <-ctx.Done():
				return exitSIGTERM
			case <-time.After(time.Second):
			}
		}
		fmt.Printf("Ray runtime started (fake worker of %s).\n", gcsAddress)
	}
	r, err := startRaylet(ctx, gcsAddress, f.get("node-manager-port", defaultRayletPort), n.instance, numCPUs(f, runtime.NumCPU()), errs)
	if err != nil {
		return fail(err)
	}
	serving := workerServes(gcsAddress, r)
	if sv != nil {
		headID.Store(r.id)
		serving = func() bool { return sv.runs() && !r.exited() }
	}
	go func() { errs <- listenAndServe(ctx, ":"+n.servePort, proxy{serving: serving}) }()
	lost := make(chan struct{})
	var why string
	go func() {
		why = watchGCS(ctx, r)
		close(lost)
	}()
	go func() {
		errs <- listenAndServe(ctx, ":"+f.get("dashboard-agent-listen-port", defaultAgentPort), agent{raylet: r})
	}()
	select {
	case <-ctx.Done():
		return exitSIGTERM
	case <-lost:
		if ctx.Err() != nil {
			return exitSIGTERM
		}
		fmt.Fprintf(os.Stderr, "ray: the raylet of node %x exited: %s\n", r.id, why)
		return exitRayletDied
	case err := <-errs:
		if ctx.Err() != nil {
			return exitSIGTERM // a server that stopped with the signal
		}
		return fail(err)
	}
}

// idle runs until SIGTERM or SIGINT and ends as `ray start` does.
func idle() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	fmt.Println("Ray autoscaler started (fake: it makes no decisions).")
	<-ctx.Done()
	return exitSIGTERM
}

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "ray: %v\n", err)
	return 1
}

// listenAgain listens on addr, trying again for up to five seconds while the address is in use: a GCS started
// again at its address can find the port held for a moment by a connection that a raylet redialling that
// address made to itself (TCP's simultaneous open, when the kernel picks the port it dials as its own).
func listenAgain(ctx context.Context, addr string) (net.Listener, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		lis, err := net.Listen("tcp", addr)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return lis, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// listenAndServe runs h on addr until ctx ends.
func listenAndServe(ctx context.Context, addr string, h http.Handler) error {
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

// checkAlive reports whether the GCS at address answers its health check within two seconds.
func checkAlive(ctx context.Context, address string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return call(ctx, address, methodCheckAliveHeartbeat, []byte{}) == nil
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

// agent is the dashboard agent's HTTP server on every node: the raylet health kray's probes read, failing once
// the node's raylet has exited (drained).
type agent struct{ raylet *raylet }

func (a agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/local_raylet_healthz", "/api/healthz":
		if a.raylet.exited() {
			http.Error(w, "the raylet is not running", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("success"))
	default:
		http.NotFound(w, r)
	}
}

// listNodes runs `ray list nodes`: one line per node the GCS at --address (else RAY_ADDRESS, else the local
// head's) lists, its instance ID (the pod name) and its state, live nodes first.
func listNodes(f flags) int {
	address := f.get("address", os.Getenv("RAY_ADDRESS"))
	if address == "" {
		address = "127.0.0.1:" + defaultGCSPort
	}
	c, err := (&ray.GRPCDialer{}).Dial(address, clientCredentials())
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return fail(err)
	}
	for _, n := range nodes {
		fmt.Printf("%s %s %x\n", n.InstanceID, n.Status, n.ID)
	}
	return 0
}
