package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/kray-project/kray/pkg/ray"
)

// freePort is a TCP port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// startNode runs `ray start` with args until the test ends, and returns its exit code's channel.
func startNode(t *testing.T, instance string, args ...string) <-chan int {
	t.Helper()
	done, _ := startNodeServing(t, instance, args...)
	return done
}

// startNodeServing is startNode, also returning the port of the node's Serve proxy.
func startNodeServing(t *testing.T, instance string, args ...string) (<-chan int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := parseFlags(args)
	n := node{instance: instance, servePort: freePort(t)}
	done := make(chan int, 1)
	go func() { done <- startUntil(ctx, f, n) }()
	return done, n.servePort
}

// kray's own GCS client against the fake: a worker registers as an IDLE node under its pod name; a drain makes
// it DRAINING, its raylet exits (the node is listed DEAD, after the live ones, and the agent's raylet health
// fails) while `ray start` goes on; a restarted container registers a new node under the same pod name.
func TestDrainedRayletExits(t *testing.T) {
	gcsPort := freePort(t)
	startNode(t, "head-0", "--head", "--port="+gcsPort, "--dashboard-port="+freePort(t),
		"--dashboard-agent-listen-port="+freePort(t), "--node-manager-port="+freePort(t))
	address := "127.0.0.1:" + gcsPort
	agentPort := freePort(t)
	worker := startNode(t, "worker-a", "--address="+address, "--dashboard-agent-listen-port="+agentPort, "--node-manager-port="+freePort(t))
	client, err := (&ray.GRPCDialer{}).Dial(address, ray.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	var node ray.Node
	waitFor(t, func() bool {
		nodes, err := client.Nodes(context.Background())
		n, ok := ray.FindNode(nodes, "worker-a", "")
		node = n
		return err == nil && ok && len(nodes) == 2 && n.Status == ray.NodeStatusIdle && rayletHealthy(agentPort)
	})
	reply, err := client.Drain(context.Background(), node.ID, "test", time.Now().Add(time.Minute))
	if err != nil || !reply.Accepted {
		t.Fatalf("drain: %+v, %v", reply, err)
	}
	waitFor(t, func() bool {
		nodes, _ := client.Nodes(context.Background())
		got, ok := ray.FindNodeByID(nodes, node.ID)
		return ok && got.Status == ray.NodeStatusDead && nodes[len(nodes)-1].Status == ray.NodeStatusDead && !rayletHealthy(agentPort)
	})
	select {
	case code := <-worker:
		t.Fatalf("ray start ended with %d after the drain; Ray's goes on blocking", code)
	case <-time.After(time.Second):
	}
	// The container restarts: a new raylet registers a new node under the same pod name.
	startNode(t, "worker-a", "--address="+address, "--dashboard-agent-listen-port="+freePort(t), "--node-manager-port="+freePort(t))
	waitFor(t, func() bool {
		nodes, _ := client.Nodes(context.Background())
		n, ok := ray.FindNode(nodes, "worker-a", "")
		return ok && string(n.ID) != string(node.ID) && n.Status == ray.NodeStatusIdle
	})
	// A drain of a dead node is accepted, as Ray's GCS does.
	if reply, err := client.Drain(context.Background(), node.ID, "again", time.Now().Add(time.Minute)); err != nil || !reply.Accepted {
		t.Errorf("drain of a dead node: %+v, %v", reply, err)
	}
}

// rayletHealthy reports whether the agent on port says its raylet is healthy.
func rayletHealthy(port string) bool {
	resp, err := http.Get("http://127.0.0.1:" + port + "/api/local_raylet_healthz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// A worker whose GCS stops answering exits with 1 once RAY_gcs_rpc_server_reconnect_timeout_s has passed, as
// Ray's raylet does (and `ray start --block` with it).
func TestRayletWithoutGCSExits(t *testing.T) {
	t.Setenv(envGCSReconnectTimeout, "2")
	gcsPort := freePort(t)
	headCtx, stopHead := context.WithCancel(context.Background())
	head := parseFlags([]string{"--head", "--port=" + gcsPort, "--dashboard-port=" + freePort(t),
		"--dashboard-agent-listen-port=" + freePort(t), "--node-manager-port=" + freePort(t)})
	headDone := make(chan int, 1)
	headNode := node{instance: "head-0", servePort: freePort(t)}
	go func() { headDone <- startUntil(headCtx, head, headNode) }()
	worker := startNode(t, "worker-b", "--address=127.0.0.1:"+gcsPort, "--dashboard-agent-listen-port="+freePort(t), "--node-manager-port="+freePort(t))
	client, _ := (&ray.GRPCDialer{}).Dial("127.0.0.1:"+gcsPort, ray.Credentials{})
	waitFor(t, func() bool {
		nodes, _ := client.Nodes(context.Background())
		_, ok := ray.FindNode(nodes, "worker-b", "")
		return ok
	})
	stopHead()
	<-headDone
	select {
	case code := <-worker:
		if code != exitRayletDied {
			t.Errorf("ray start ended with %d, want %d", code, exitRayletDied)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the raylet without a GCS did not exit")
	}
}

// A head that comes back without fault tolerance is a new GCS with a new cluster ID: it lists only the nodes
// that register with it, refuses the old worker's raylet, which exits with 1 at its next liveness self-check
// (Ray's raylet_liveness_self_check_interval_ms), and the restarted worker joins the new GCS.
func TestRayletOfARestartedGCSExitsAtItsSelfCheck(t *testing.T) {
	t.Setenv(envSelfCheckInterval, "3000")
	gcsPort := freePort(t)
	stopOld, oldDone := startHead(t, gcsPort)
	address := "127.0.0.1:" + gcsPort
	worker := startNode(t, "worker-c", "--address="+address, "--dashboard-agent-listen-port="+freePort(t), "--node-manager-port="+freePort(t))
	client, _ := (&ray.GRPCDialer{}).Dial(address, ray.Credentials{})
	listed := func() bool {
		nodes, _ := client.Nodes(context.Background())
		n, ok := ray.FindNode(nodes, "worker-c", "")
		return ok && n.Status != ray.NodeStatusDead
	}
	waitFor(t, listed)
	stopOld()
	<-oldDone
	stopNew, newDone := startHead(t, gcsPort)
	defer func() { stopNew(); <-newDone }()
	select {
	case code := <-worker:
		if code != exitRayletDied {
			t.Errorf("ray start ended with %d, want %d", code, exitRayletDied)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the raylet of the GCS before did not exit")
	}
	if listed() {
		t.Error("the new GCS lists the old worker's node")
	}
	startNode(t, "worker-c", "--address="+address, "--dashboard-agent-listen-port="+freePort(t), "--node-manager-port="+freePort(t))
	waitFor(t, listed)
}

// A zombie worker (its marker file new) runs without joining the GCS and with an unhealthy raylet; its next
// run, the marker there, joins.
func TestZombieWorkerJoinsOnlyAfterARestart(t *testing.T) {
	t.Setenv(envZombieMarker, t.TempDir()+"/zombie")
	gcsPort := freePort(t)
	startNode(t, "head-0", "--head", "--port="+gcsPort, "--dashboard-port="+freePort(t),
		"--dashboard-agent-listen-port="+freePort(t), "--node-manager-port="+freePort(t))
	address := "127.0.0.1:" + gcsPort
	client, _ := (&ray.GRPCDialer{}).Dial(address, ray.Credentials{})
	listed := func() bool {
		nodes, _ := client.Nodes(context.Background())
		_, ok := ray.FindNode(nodes, "worker-z", "")
		return ok
	}
	agentPort := freePort(t)
	startNode(t, "worker-z", "--address="+address, "--dashboard-agent-listen-port="+agentPort, "--node-manager-port="+freePort(t))
	waitFor(t, func() bool {
		resp, err := http.Get("http://127.0.0.1:" + agentPort + "/api/local_raylet_healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusServiceUnavailable
	})
	time.Sleep(2 * time.Second)
	if listed() {
		t.Fatal("the zombie joined the GCS")
	}
	startNode(t, "worker-z", "--address="+address, "--dashboard-agent-listen-port="+freePort(t), "--node-manager-port="+freePort(t))
	waitFor(t, listed)
}

// startHead runs `ray start --head` on gcsPort until the returned function stops it; the channel gives its
// exit code. A head started again on the same port is a GCS restarted at the same address.
func startHead(t *testing.T, gcsPort string) (context.CancelFunc, <-chan int) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan int, 1)
	f := parseFlags([]string{"--head", "--port=" + gcsPort, "--dashboard-port=" + freePort(t),
		"--dashboard-agent-listen-port=" + freePort(t), "--node-manager-port=" + freePort(t)})
	go func() { done <- startUntil(ctx, f, node{instance: "head-0", servePort: freePort(t)}) }()
	return stop, done
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 15 s")
}

// A GCS started again at an address held for a moment (by a raylet's connection to itself, say) waits for it
// instead of failing.
func TestListenAgainWaitsForTheAddress(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := held.Addr().String()
	time.AfterFunc(300*time.Millisecond, func() { held.Close() })
	lis, err := listenAgain(context.Background(), addr)
	if err != nil {
		t.Fatalf("listen on %s once it is free: %v", addr, err)
	}
	lis.Close()
}
