package main

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/kray-project/kray/pkg/ray"
)

// startRedis runs a redis-server on a free port until the test ends and returns its address; the test is
// skipped where no redis-server is installed (the kind suite runs the same with a real Redis pod).
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server on this machine")
	}
	port := freePort(t)
	cmd := exec.Command(bin, "--port", port, "--save", "", "--appendonly", "no", "--protected-mode", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	address := "127.0.0.1:" + port
	s := &redisStore{address: address}
	waitFor(t, func() bool { _, err := s.do(context.Background(), "PING"); return err == nil })
	return address
}

// With fault tolerance a GCS started again keeps the cluster ID and the live nodes in Redis: the worker of the
// GCS before reconnects and stays, listed under its node ID; a cleanup (the Redis cleanup Job's python) leaves
// nothing of the namespace.
func TestFaultTolerantGCSKeepsItsWorkers(t *testing.T) {
	address := startRedis(t)
	t.Setenv(envRedisAddress, address)
	t.Setenv(envStorageNS, "ns-uid")
	t.Setenv(envSelfCheckInterval, "1000")
	gcsPort := freePort(t)
	stopOld, oldDone := startHead(t, gcsPort)
	gcsAddress := "127.0.0.1:" + gcsPort
	worker := startNode(t, "worker-f", "--address="+gcsAddress, "--dashboard-agent-listen-port="+freePort(t), "--node-manager-port="+freePort(t))
	client, _ := (&ray.GRPCDialer{}).Dial(gcsAddress, ray.Credentials{})
	var before ray.Node
	waitFor(t, func() bool {
		nodes, _ := client.Nodes(context.Background())
		n, ok := ray.FindNode(nodes, "worker-f", "")
		before = n
		return ok && n.Status != ray.NodeStatusDead
	})
	stopOld()
	<-oldDone
	stopNew, newDone := startHead(t, gcsPort)
	defer func() { stopNew(); <-newDone }()
	waitFor(t, func() bool {
		nodes, _ := client.Nodes(context.Background())
		n, ok := ray.FindNodeByID(nodes, before.ID)
		return ok && n.Status != ray.NodeStatusDead
	})
	select {
	case code := <-worker:
		t.Fatalf("the worker of a fault-tolerant GCS ended with %d", code)
	case <-time.After(3 * time.Second): // three self-checks passed
	}
	if code := python([]string{"-c", "from ray._private.gcs_utils import cleanup_redis_storage"}); code != 0 {
		t.Fatalf("python cleanup exited %d", code)
	}
	n, err := (&redisStore{address: address}).do(context.Background(), "EXISTS", "ns-uid"+redisClusterIDKey, "ns-uid"+redisNodeTableKey)
	if err != nil || n != int64(0) {
		t.Errorf("keys left after the cleanup: %v, %v", n, err)
	}
}
