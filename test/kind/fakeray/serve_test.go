package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	raydashboard "github.com/kray-project/kray/pkg/dashboard"
	"github.com/kray-project/kray/pkg/ray"
)

// proxyHealthy reports whether the Serve proxy on port answers its health check.
func proxyHealthy(port string) bool {
	resp, err := http.Get("http://127.0.0.1:" + port + raydashboard.ServeHealthPath)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// kray's own Serve client against the fake: a config deploys and runs; proxies answer on the head once Serve
// runs and on the workers that run replicas; at target capacity 0 no worker runs one; a drained worker's
// proxy goes with its replicas.
func TestServeProxiesWhereReplicasRun(t *testing.T) {
	gcsPort, dashPort := freePort(t), freePort(t)
	_, headProxy := startNodeServing(t, "head-0", "--head", "--port="+gcsPort, "--dashboard-port="+dashPort,
		"--dashboard-agent-listen-port="+freePort(t), "--node-manager-port="+freePort(t))
	address := "127.0.0.1:" + gcsPort
	_, proxyA := startNodeServing(t, "worker-a", "--address="+address, "--dashboard-agent-listen-port="+freePort(t), "--node-manager-port="+freePort(t))
	_, proxyB := startNodeServing(t, "worker-b", "--address="+address, "--dashboard-agent-listen-port="+freePort(t), "--node-manager-port="+freePort(t))
	gcsClient, _ := (&ray.GRPCDialer{}).Dial(address, ray.Credentials{})
	waitFor(t, func() bool { nodes, _ := gcsClient.Nodes(context.Background()); return len(nodes) == 3 })
	if proxyHealthy(headProxy) || proxyHealthy(proxyA) {
		t.Fatal("proxies answer before Serve runs")
	}
	api := raydashboard.HTTPDialer{HTTP: http.DefaultClient}.Serve("http://127.0.0.1:"+dashPort, "")
	config := []byte(`{"applications":[{"name":"fruit","import_path":"fruit:app","deployments":[{"name":"Mango","num_replicas":2},{"name":"Pear"}]}]}`)
	if err := api.Apply(context.Background(), config); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		d, err := api.Applications(context.Background())
		return err == nil && d.Applications["fruit"].Status == "RUNNING" && proxyHealthy(headProxy) && proxyHealthy(proxyA) && proxyHealthy(proxyB)
	})
	if got := proxiedOn(t, api); len(got) != 3 || !got["head-0"] || !got["worker-a"] || !got["worker-b"] {
		t.Errorf("Serve reports proxies on %v, want head-0, worker-a and worker-b", got)
	}
	if err := api.Apply(context.Background(), bytes.Replace(config, []byte(`{"applications"`), []byte(`{"target_capacity":0,"applications"`), 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		d, err := api.Applications(context.Background())
		return err == nil && d.TargetCapacity != nil && *d.TargetCapacity == 0 && !proxyHealthy(proxyA) && !proxyHealthy(proxyB) && proxyHealthy(headProxy)
	})
	if got := proxiedOn(t, api); len(got) != 1 || !got["head-0"] {
		t.Errorf("at target capacity 0 Serve reports proxies on %v, want head-0 alone", got)
	}
	if err := api.Apply(context.Background(), config); err != nil {
		t.Fatal(err)
	}
	nodes, _ := gcsClient.Nodes(context.Background())
	a, _ := ray.FindNode(nodes, "worker-a", "")
	if _, err := gcsClient.Drain(context.Background(), a.ID, "test", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return !proxyHealthy(proxyA) && proxyHealthy(proxyB) })
}

// proxiedOn is the instance IDs (pod names) of the nodes Serve reports a proxy on that takes traffic.
func proxiedOn(t *testing.T, api raydashboard.ServeAPI) map[string]bool {
	t.Helper()
	d, err := api.Applications(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range d.Proxies {
		if !p.Leaving() && p.NodeIP != "" {
			out[p.NodeInstanceID] = true
		}
	}
	return out
}

// A head told to pad its Serve details answers the same object with a padding field of that many bytes:
// valid JSON, which kray's client reads as Serve details while the padding fits its bound.
func TestServeAnswerPadding(t *testing.T) {
	d := newDashboard(&serve{}, newTaskTable(time.Now))
	d.padServe = 100_000
	srv := httptest.NewServer(d)
	defer srv.Close()
	resp, err := http.Get(srv.URL + raydashboard.ServeApplicationsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Applications map[string]any `json:"applications"`
		Padding      string         `json:"padding"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || len(got.Padding) != 100_000 || got.Applications == nil {
		t.Errorf("padding of %d bytes, applications %v, %v", len(got.Padding), got.Applications, err)
	}
	api := raydashboard.HTTPDialer{HTTP: srv.Client()}.Serve(srv.URL, "")
	if _, err := api.Applications(context.Background()); err != nil {
		t.Errorf("kray's client: %v", err)
	}
}
