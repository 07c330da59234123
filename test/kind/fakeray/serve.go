package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kray-project/kray/pkg/ray"
)

// Ray Serve as kray sees it: the Serve REST API on the head's dashboard, and a Serve proxy on every node that
// runs replicas (and on the head once Serve runs), whose health the readiness probes and kray read.

// serveDeployFor is how long an application of a new config deploys before it runs.
const serveDeployFor = 2 * time.Second

// defaultServePort is the Serve proxy's port (Ray's default HTTP port).
const defaultServePort = "8000"

// methodReplicasOn asks the head, from a worker's proxy, how many Serve replicas run on a node (field 1: the
// node ID); the answer's field 1 is the count. Ray's proxies learn it from Serve's controller.
const methodReplicasOn = "/ray.serve.ServeController/ReplicasOnNode"

// serveApp is one application of the config Serve runs.
type serveApp struct {
	name        string
	routePrefix string
	replicas    map[string]int // by deployment: num_replicas, else autoscaling min_replicas, else 1
	since       time.Time
}

// serve is the head's Serve: the config it runs (applications and target_capacity), placed on the cluster's
// live nodes.
type serve struct {
	mu       sync.Mutex
	running  bool
	apps     map[string]*serveApp
	capacity *float64
	gcs      *gcs
	head     func() []byte // the head node's ID
}

// ServeHTTP answers GET (the declarative details) and PUT (a new config) on /api/serve/applications/.
func (s *serve) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, s.details(time.Now()))
	case http.MethodPut:
		body, _ := io.ReadAll(r.Body)
		if err := s.apply(body, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// apply replaces the running config with body (a ServeDeploySchema as JSON). An application whose import path
// is the same keeps running; a new target_capacity only rescales.
func (s *serve) apply(body []byte, now time.Time) error {
	var config struct {
		TargetCapacity *float64 `json:"target_capacity"`
		Applications   []struct {
			Name        string `json:"name"`
			RoutePrefix string `json:"route_prefix"`
			ImportPath  string `json:"import_path"`
			Deployments []struct {
				Name        string `json:"name"`
				NumReplicas *int   `json:"num_replicas"`
				Autoscaling *struct {
					MinReplicas *int `json:"min_replicas"`
				} `json:"autoscaling_config"`
			} `json:"deployments"`
		} `json:"applications"`
	}
	if err := json.Unmarshal(body, &config); err != nil || config.Applications == nil {
		return fmt.Errorf("1 validation error for ServeDeploySchema\napplications\n  field required (type=value_error.missing)")
	}
	if tc := config.TargetCapacity; tc != nil && (*tc < 0 || *tc > 100) {
		return fmt.Errorf("1 validation error for ServeDeploySchema\ntarget_capacity\n  value must be between 0 and 100")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	apps := map[string]*serveApp{}
	for _, a := range config.Applications {
		app := &serveApp{name: a.Name, routePrefix: a.RoutePrefix, replicas: map[string]int{}, since: now}
		if app.name == "" {
			app.name = "default"
		}
		for _, d := range a.Deployments {
			n := 1
			switch {
			case d.NumReplicas != nil:
				n = *d.NumReplicas
			case d.Autoscaling != nil && d.Autoscaling.MinReplicas != nil:
				n = max(1, *d.Autoscaling.MinReplicas)
			}
			app.replicas[d.Name] = n
		}
		if old := s.apps[app.name]; old != nil {
			app.since = old.since
		}
		apps[app.name] = app
	}
	s.apps, s.capacity, s.running = apps, config.TargetCapacity, true
	return nil
}

// runs reports whether Serve runs (a config was put): the head's proxy answers from then on.
func (s *serve) runs() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// details is Serve's declarative details now, the fields kray and KubeRay read: the applications, and a proxy
// on the head once Serve runs and on every live node that runs a replica.
func (s *serve) details(now time.Time) map[string]any {
	s.mu.Lock()
	apps := map[string]any{}
	for name, app := range s.apps {
		status, depStatus := "DEPLOYING", "UPDATING"
		if now.Sub(app.since) >= serveDeployFor {
			status, depStatus = "RUNNING", "HEALTHY"
		}
		deployments := map[string]any{}
		for d := range app.replicas {
			deployments[d] = map[string]any{"name": d, "status": depStatus, "message": "", "replicas": []any{}}
		}
		apps[name] = map[string]any{"name": name, "route_prefix": app.routePrefix, "status": status, "message": "",
			"last_deployed_time_s": float64(app.since.UnixMilli()) / 1000, "deployments": deployments}
	}
	running, capacity := s.running, s.capacity
	s.mu.Unlock()
	proxies := map[string]any{}
	if running && s.gcs != nil {
		head := string(s.head())
		for _, n := range s.gcs.nodeStates() {
			live := n.Status == ray.NodeStatusIdle || n.Status == ray.NodeStatusRunning
			if !live || string(n.ID) != head && s.replicasOn(n.ID) == 0 {
				continue
			}
			id := hex.EncodeToString(n.ID)
			proxies[id] = map[string]any{"node_id": id, "node_ip": n.IP, "node_instance_id": n.InstanceID, "actor_id": id[:32],
				"actor_name": "SERVE_PROXY_ACTOR-" + id, "log_file_path": "/tmp/ray/session_latest/logs/serve/proxy.log", "status": "HEALTHY"}
		}
	}
	return map[string]any{"deploy_mode": "MULTI_APP", "proxy_location": "EveryNode", "proxies": proxies, "applications": apps, "target_capacity": capacity}
}

// replicasOn is how many replicas Serve runs on the node: the replicas of every deployment, scaled by the
// target capacity, spread over the live worker nodes (IDLE or RUNNING: live and not draining) in turn, on the
// head when there is none. A draining node gets none: Serve moves its replicas away.
func (s *serve) replicasOn(node []byte) int {
	s.mu.Lock()
	total := 0
	for _, app := range s.apps {
		for _, n := range app.replicas {
			scaled := float64(n)
			if s.capacity != nil {
				scaled = math.Ceil(scaled * *s.capacity / 100)
			}
			total += int(scaled)
		}
	}
	s.mu.Unlock()
	var hosts []string
	for _, n := range s.gcs.nodeStates() {
		live := n.Status == ray.NodeStatusIdle || n.Status == ray.NodeStatusRunning
		if live && string(n.ID) != string(s.head()) {
			hosts = append(hosts, string(n.ID))
		}
	}
	if len(hosts) == 0 {
		hosts = []string{string(s.head())}
	}
	sort.Strings(hosts)
	count := 0
	for i := 0; i < total; i++ {
		if hosts[i%len(hosts)] == string(node) {
			count++
		}
	}
	return count
}

// proxy is a node's Serve proxy: /-/healthz answers "success" while the node runs replicas (the head's, once
// Serve runs), else 503, as Ray's proxies on nodes without replicas are not there to answer.
type proxy struct {
	serving func() bool
}

func (p proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/-/healthz" {
		http.NotFound(w, r)
		return
	}
	if !p.serving() {
		http.Error(w, "no Serve proxy on this node", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("success"))
}

// workerServes asks the head whether Serve runs replicas on the worker's node.
func workerServes(gcsAddress string, r *raylet) func() bool {
	return func() bool {
		if r.exited() {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), r.id)
		reply, err := callReply(ctx, gcsAddress, methodReplicasOn, req)
		if err != nil {
			return false
		}
		_, _, l := protowire.ConsumeTag(reply)
		if l < 0 {
			return false
		}
		n, m := protowire.ConsumeVarint(reply[l:])
		return m > 0 && n > 0
	}
}

// encodeCount is the answer to methodReplicasOn.
func encodeCount(n int) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(n))
}
