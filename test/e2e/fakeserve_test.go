package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/pkg/constants"
)

// fakeServe stands in for Ray Serve on every cluster of the suite, behind the fake dashboard: the Serve
// REST API (/api/serve/applications/, as Ray's dashboard/modules/serve serves it) per cluster, reached
// through --ray-dashboard-address http://<fake>/c/{namespace}/{cluster}, and the Serve proxy health check of
// each head pod, reached through --ray-serve-probe-address http://<fake>/p/{namespace}/{pod}. A cluster has
// no application until a config is put; each application of a config then deploys for deployFor and runs,
// or fails for an import path a test planned to fail; an application a new config drops is DELETING for
// deployFor, then gone. A head restart without GCS fault tolerance empties a cluster's Serve. As Serve with
// its default proxy location, it reports a proxy on the head once it runs and on every worker that runs a
// replica: the replicas (num_replicas, else autoscaling min_replicas, else 1 per deployment, scaled by the
// target capacity) are spread over
// the cluster's live Ray nodes (worker pods with an IP, not deleted, not drained) in turn, on the head when
// there is none.
type fakeServe struct {
	mu       sync.Mutex
	clusters map[string]*serveCluster // by "<namespace>/<cluster>"
	failing  map[string]string        // import path -> the DEPLOY_FAILED message
	sick     map[string]bool          // "<namespace>/<pod>" whose proxy answers 503
	down     map[string]bool          // "<namespace>/<cluster>" whose Serve API refuses
	probes   map[string]int           // proxy health checks per "<namespace>/<pod>"
}

// deployFor is how long an application of a new config deploys (or is deleted) before it runs (or goes).
const deployFor = time.Second

type serveCluster struct {
	puts []string // the configs put, in order
	apps map[string]*serveApp
	// capacity is the target_capacity of the config Serve runs (nil: none, 100%), as the last put set it.
	capacity *float64
}

type serveApp struct {
	importPath  string
	deployments []string
	// replicas counts the replicas of all its deployments.
	replicas int
	since    time.Time
	deleting bool
}

func newFakeServe() *fakeServe {
	return &fakeServe{clusters: map[string]*serveCluster{}, failing: map[string]string{}, sick: map[string]bool{},
		down: map[string]bool{}, probes: map[string]int{}}
}

// failImport makes the applications with importPath fail to deploy with message.
func (f *fakeServe) failImport(importPath, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing[importPath] = message
}

// restartHead empties the Serve of cluster, as a head restarted without GCS fault tolerance does.
func (f *fakeServe) restartHead(ns, cluster string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.clusters[ns+"/"+cluster]; c != nil {
		c.apps = map[string]*serveApp{}
	}
}

// setSick makes the Serve proxy of pod answer its health check with 503 (true) or 200 (false).
func (f *fakeServe) setSick(ns, pod string, sick bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sick[ns+"/"+pod] = sick
}

// setDown makes the Serve API of cluster answer 503 (true) or serve again (false).
func (f *fakeServe) setDown(ns, cluster string, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[ns+"/"+cluster] = down
}

// puts returns the configs put on cluster, in order.
func (f *fakeServe) puts(ns, cluster string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.clusters[ns+"/"+cluster]; c != nil {
		return append([]string(nil), c.puts...)
	}
	return nil
}

// capacities returns the target_capacity of each config put on cluster, in order (-1 for none).
func (f *fakeServe) capacities(ns, cluster string) []float64 {
	var out []float64
	for _, put := range f.puts(ns, cluster) {
		var config struct {
			TargetCapacity *float64 `json:"target_capacity"`
		}
		_ = json.Unmarshal([]byte(put), &config)
		if config.TargetCapacity == nil {
			out = append(out, -1)
			continue
		}
		out = append(out, *config.TargetCapacity)
	}
	return out
}

// probed reports how many health checks pod's proxy answered.
func (f *fakeServe) probed(ns, pod string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.probes[ns+"/"+pod]
}

// serveAPI answers a Serve REST API call for cluster ("<namespace>/<cluster>").
func (f *fakeServe) serveAPI(w http.ResponseWriter, r *http.Request, cluster string) {
	var nodes []corev1.Pod
	if r.Method == http.MethodGet {
		nodes = rayNodePods(cluster) // before the lock: the proxy health checks never wait on the API server
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[cluster] {
		http.Error(w, "Serve controller is not available", http.StatusServiceUnavailable)
		return
	}
	c := f.clusters[cluster]
	if c == nil {
		c = &serveCluster{apps: map[string]*serveApp{}}
		f.clusters[cluster] = c
	}
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, f.details(c, nodes, time.Now()))
	case http.MethodPut:
		body, _ := io.ReadAll(r.Body)
		var config struct {
			TargetCapacity *float64 `json:"target_capacity"`
			Applications   []struct {
				Name        string `json:"name"`
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
			http.Error(w, "1 validation error for ServeDeploySchema\napplications\n  field required (type=value_error.missing)", http.StatusBadRequest)
			return
		}
		if tc := config.TargetCapacity; tc != nil && (*tc < 0 || *tc > 100) {
			http.Error(w, "1 validation error for ServeDeploySchema\ntarget_capacity\n  value must be between 0 and 100", http.StatusBadRequest)
			return
		}
		c.puts = append(c.puts, string(body))
		c.capacity = config.TargetCapacity // a new target capacity scales the deployments; the applications go on
		now := time.Now()
		kept := map[string]bool{}
		for _, a := range config.Applications {
			name := a.Name
			if name == "" {
				name = "default"
			}
			kept[name] = true
			app := &serveApp{importPath: a.ImportPath, since: now}
			for _, d := range a.Deployments {
				app.deployments = append(app.deployments, d.Name)
				switch {
				case d.NumReplicas != nil:
					app.replicas += *d.NumReplicas
				case d.Autoscaling != nil && d.Autoscaling.MinReplicas != nil:
					app.replicas += max(1, *d.Autoscaling.MinReplicas)
				default:
					app.replicas++
				}
			}
			if len(app.deployments) == 0 {
				app.deployments = []string{a.ImportPath[strings.LastIndexAny(a.ImportPath, ".:")+1:]}
				app.replicas = 1
			}
			if old := c.apps[name]; old != nil && !old.deleting && old.importPath == app.importPath {
				app.since = old.since // the same application: Serve leaves it running
			}
			c.apps[name] = app
		}
		for name, app := range c.apps {
			if !kept[name] && !app.deleting {
				app.deleting, app.since = true, now
			}
		}
		w.WriteHeader(http.StatusOK)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// details is Serve's declarative details of c, whose Ray nodes are the pods nodes, now, as the dashboard
// renders them.
func (f *fakeServe) details(c *serveCluster, nodes []corev1.Pod, now time.Time) map[string]any {
	apps := map[string]any{}
	for name, app := range c.apps {
		settled := now.Sub(app.since) >= deployFor
		if app.deleting {
			if settled {
				delete(c.apps, name)
				continue
			}
		}
		status, depStatus, message := "DEPLOYING", "UPDATING", ""
		switch {
		case app.deleting:
			status = "DELETING"
		case settled && f.failing[app.importPath] != "":
			status, depStatus, message = "DEPLOY_FAILED", "UNHEALTHY", f.failing[app.importPath]
		case settled:
			status, depStatus = "RUNNING", "HEALTHY"
		}
		deployments := map[string]any{}
		for _, d := range app.deployments {
			deployments[d] = map[string]any{"name": d, "status": depStatus, "status_trigger": "CONFIG_UPDATE_STARTED", "message": message, "replicas": []any{}}
		}
		apps[name] = map[string]any{"name": name, "route_prefix": "/" + name, "status": status, "message": message,
			"last_deployed_time_s": float64(app.since.UnixMilli()) / 1000, "deployments": deployments}
	}
	proxies := map[string]any{}
	for _, p := range proxied(c, nodes) {
		id := hex.EncodeToString(nodeIDOf(p.UID))
		proxies[id] = map[string]any{"node_id": id, "node_ip": p.Status.PodIP, "node_instance_id": p.Name, "actor_id": id[:32],
			"actor_name": "SERVE_PROXY_ACTOR-" + id, "worker_id": id, "log_file_path": "/serve/proxy.log", "status": "HEALTHY"}
	}
	return map[string]any{"deploy_mode": "MULTI_APP", "controller_info": map[string]any{"node_id": "fake"}, "proxy_location": "EveryNode",
		"proxies": proxies, "applications": apps, "target_capacity": c.capacity}
}

// proxiedPods are the names of the pods of cluster in ns that Serve runs a proxy on now.
func (f *fakeServe) proxiedPods(ns, cluster string) map[string]bool {
	nodes := rayNodePods(ns + "/" + cluster)
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]bool{}
	if c := f.clusters[ns+"/"+cluster]; c != nil {
		for _, p := range proxied(c, nodes) {
			out[p.Name] = true
		}
	}
	return out
}

// rayNodePods are the pods of the cluster key ("<namespace>/<cluster>") that are Ray nodes: with an IP, not
// being deleted, and (workers) not drained; the head first, the workers by name. None when they cannot be
// listed.
func rayNodePods(key string) []corev1.Pod {
	ns, cluster, _ := strings.Cut(key, "/")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &corev1.PodList{}
	if err := k8s.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{constants.LabelCluster: cluster}); err != nil {
		return nil
	}
	var heads, workers []corev1.Pod
	for _, p := range list.Items {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		switch p.Labels[constants.LabelNodeType] {
		case constants.NodeTypeHead:
			heads = append(heads, p)
		case constants.NodeTypeWorker:
			if gcs == nil || !gcs.drained(p.Namespace, p.Name) {
				workers = append(workers, p)
			}
		}
	}
	sort.Slice(workers, func(i, j int) bool { return workers[i].Name < workers[j].Name })
	return append(heads, workers...)
}

// proxied are the pods among nodes (rayNodePods) that c's Serve runs a proxy on: none before a config
// runs, then the head and each worker that runs a replica (see fakeServe).
func proxied(c *serveCluster, nodes []corev1.Pod) []corev1.Pod {
	if len(c.apps) == 0 {
		return nil
	}
	replicas := 0
	for _, app := range c.apps {
		if !app.deleting {
			replicas += app.replicas
		}
	}
	if c.capacity != nil {
		replicas = int(math.Ceil(float64(replicas) * *c.capacity / 100)) // Serve scales each deployment; the fake, the sum
	}
	var out []corev1.Pod
	for _, p := range nodes {
		if p.Labels[constants.LabelNodeType] == constants.NodeTypeHead {
			out = append(out, p)
		} else if replicas > 0 {
			out = append(out, p)
			replicas--
		}
	}
	return out
}

// probe answers the Serve proxy health check of pod ("<namespace>/<pod>").
func (f *fakeServe) probe(w http.ResponseWriter, pod string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.probes[pod]++
	if f.sick[pod] {
		http.Error(w, "no proxy", http.StatusServiceUnavailable)
		return
	}
	_, _ = fmt.Fprint(w, "success")
}

// route takes the /c/<namespace>/<cluster> or /p/<namespace>/<pod> prefix off path: the cluster's Serve
// API, a pod's proxy health check, or (with no prefix) what remains for the Job API.
func route(path string) (kind, key, rest string) {
	for _, prefix := range []string{"/c/", "/p/"} {
		if tail, ok := strings.CutPrefix(path, prefix); ok {
			parts := strings.SplitN(tail, "/", 3)
			if len(parts) == 3 {
				return prefix[1:2], parts[0] + "/" + parts[1], "/" + parts[2]
			}
		}
	}
	return "", "", path
}
