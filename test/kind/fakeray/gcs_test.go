package main

import (
	"context"
	"fmt"
	"net"
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
	t.Setenv("RAY_CLOUD_INSTANCE_ID", instance)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := parseFlags(args)
	done := make(chan int, 1)
	go func() { done <- startUntil(ctx, f) }()
	return done
}

// kray's own GCS client against the fake: a worker registers as an IDLE node under its pod name; a drain makes
// it DRAINING, its raylet exits and `ray start` ends with 1, and the node is listed DEAD after the live ones.
func TestDrainedRayletExits(t *testing.T) {
	gcsPort := freePort(t)
	startNode(t, "head-0", "--head", "--port="+gcsPort, "--dashboard-port="+freePort(t),
		"--dashboard-agent-listen-port="+freePort(t), "--node-manager-port="+freePort(t))
	address := "127.0.0.1:" + gcsPort
	worker := startNode(t, "worker-a", "--address="+address, "--dashboard-agent-listen-port="+freePort(t), "--node-manager-port="+freePort(t))
	client, err := (&ray.GRPCDialer{}).Dial(address, "")
	if err != nil {
		t.Fatal(err)
	}
	var node ray.Node
	waitFor(t, func() bool {
		nodes, err := client.Nodes(context.Background())
		n, ok := ray.FindNode(nodes, "worker-a", "")
		node = n
		return err == nil && ok && len(nodes) == 2 && n.Status == ray.NodeStatusIdle
	})
	reply, err := client.Drain(context.Background(), node.ID, "test", time.Now().Add(time.Minute))
	if err != nil || !reply.Accepted {
		t.Fatalf("drain: %+v, %v", reply, err)
	}
	select {
	case code := <-worker:
		if code != exitRayletDied {
			t.Errorf("ray start ended with %d, want %d", code, exitRayletDied)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the drained raylet did not exit")
	}
	nodes, err := client.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got, ok := ray.FindNodeByID(nodes, node.ID)
	if !ok || got.Status != ray.NodeStatusDead || nodes[len(nodes)-1].Status != ray.NodeStatusDead {
		t.Errorf("nodes after the drain %+v: want the worker's DEAD, last", nodes)
	}
	// The container restarts: a new raylet registers a new node under the same pod name.
	startNode(t, "worker-a", "--address="+address, "--dashboard-agent-listen-port="+freePort(t), "--node-manager-port="+freePort(t))
	waitFor(t, func() bool {
		nodes, _ := client.Nodes(context.Background())
		n, ok := ray.FindNode(nodes, "worker-a", "")
		return ok && string(n.ID) != string(node.ID) && n.Status == ray.NodeStatusIdle
	})
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
