package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// serveAPI is serve's dashboard as a ServeAPI.
func serveAPI(t *testing.T, answers map[string]answer) (ServeAPI, *[]*http.Request, *[]string) {
	t.Helper()
	c, reqs, bodies := serve(t, answers)
	return HTTPDialer{HTTP: c.http}.Serve(c.base, "tok"), reqs, bodies
}

func TestServeApplications(t *testing.T) {
	api, reqs, _ := serveAPI(t, map[string]answer{
		"GET /api/serve/applications/": {200, `{"deploy_mode":"MULTI_APP","controller_info":{"node_id":"n"},"target_capacity":null,
			"proxies":{"n":{"node_id":"n","node_ip":"10.244.0.5","node_instance_id":"svc-head-0","actor_id":"a","actor_name":"SERVE_PROXY_ACTOR-n","worker_id":"w","log_file_path":"/tmp/ray/proxy.log","status":"HEALTHY"}},
			"applications":{"fruit_app":{"name":"fruit_app","route_prefix":"/fruit","status":"DEPLOYING","message":"",
			"deployments":{"MangoStand":{"name":"MangoStand","status":"UPDATING","message":"waiting","replicas":[]}}}}}`},
	})
	got, err := api.Applications(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := &ServeDetails{Applications: map[string]ServeApplication{
		"fruit_app": {Status: "DEPLOYING", Deployments: map[string]ServeDeployment{"MangoStand": {Status: "UPDATING", Message: "waiting"}}},
	}, Proxies: map[string]ServeProxy{"n": {NodeID: "n", NodeIP: "10.244.0.5", NodeInstanceID: "svc-head-0", Status: ProxyHealthy}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("details (-want +got):\n%s", diff)
	}
	r := (*reqs)[0]
	if r.URL.Query().Get("api_type") != "declarative" || r.Header.Get("Authorization") != "Bearer tok" {
		t.Errorf("request %s %s, Authorization %q", r.Method, r.URL, r.Header.Get("Authorization"))
	}
}

func TestServeApplicationsErrors(t *testing.T) {
	for name, a := range map[string]answer{
		"controller unreachable": {503, "Serve controller is not available"},
		"not JSON":               {200, "<html>"},
	} {
		api, _, _ := serveAPI(t, map[string]answer{"GET /api/serve/applications/": a})
		if _, err := api.Applications(context.Background()); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	api, _, _ := serveAPI(t, map[string]answer{"GET /api/serve/applications/": {503, "Serve controller is not available"}})
	_, err := api.Applications(context.Background())
	if want := "get Serve applications: the Ray dashboard answered 503 Service Unavailable: Serve controller is not available"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

func TestServeApply(t *testing.T) {
	api, reqs, bodies := serveAPI(t, map[string]answer{"PUT /api/serve/applications/": {200, ""}})
	config := []byte(`{"applications":[{"name":"a","import_path":"m:app"}]}`)
	if err := api.Apply(context.Background(), config); err != nil {
		t.Fatal(err)
	}
	if r := (*reqs)[0]; r.Header.Get("Content-Type") != "application/json" || (*bodies)[0] != string(config) {
		t.Errorf("PUT with Content-Type %q body %s", r.Header.Get("Content-Type"), (*bodies)[0])
	}
	api, _, _ = serveAPI(t, map[string]answer{"PUT /api/serve/applications/": {400, "1 validation error for ServeDeploySchema"}})
	if err := api.Apply(context.Background(), config); err == nil || !strings.Contains(err.Error(), "400 Bad Request: 1 validation error") {
		t.Errorf("a refused config: %v", err)
	}
}

func TestServeConfigJSON(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"applications:\n  - name: a\n    import_path: m:app\n", `{"applications":[{"import_path":"m:app","name":"a"}]}`, ""},
		{"", "{}", ""},
		{"- a\n- b\n", "", "must be a YAML mapping"},
		{"applications: [", "", "not valid YAML"},
	} {
		got, err := ServeConfigJSON(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one saying %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || string(got) != tc.want):
			t.Errorf("%q: %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestProbeServeProxy(t *testing.T) {
	healthy := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != ServeHealthPath || !healthy {
			http.Error(w, "no proxy", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	if ok, err := ProbeServeProxy(context.Background(), srv.Client(), srv.URL); !ok || err != nil {
		t.Errorf("healthy proxy: %t, %v", ok, err)
	}
	healthy = false
	if ok, err := ProbeServeProxy(context.Background(), srv.Client(), srv.URL); ok || err == nil || !strings.Contains(err.Error(), "the Serve proxy answered 503") {
		t.Errorf("unhealthy proxy: %t, %v", ok, err)
	}
	srv.Close()
	if ok, err := ProbeServeProxy(context.Background(), srv.Client(), srv.URL); ok || err == nil || !strings.HasPrefix(err.Error(), "Serve proxy http://") {
		t.Errorf("no proxy: %t, %v", ok, err)
	}
}

// largeServeAnswer is Serve's declarative details of one application whose deployment runs replicas
// replicas, each listed as Ray's ReplicaDetails lists it.
func largeServeAnswer(replicas int) string {
	var b strings.Builder
	b.WriteString(`{"deploy_mode":"MULTI_APP","controller_info":{"node_id":"n"},"target_capacity":null,
			"proxies":{"n":{"node_id":"n","node_ip":"10.244.0.5","node_instance_id":"svc-head-0","actor_id":"a","actor_name":"SERVE_PROXY_ACTOR-n","worker_id":"w","log_file_path":"/tmp/ray/proxy.log","status":"HEALTHY"}},` +
		`"applications":{"llm":{"name":"llm","route_prefix":"/","status":"RUNNING","message":"",` +
		`"deployments":{"Model":{"name":"Model","status":"HEALTHY","message":"","replicas":[`)
	for i := range replicas {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"node_id":"%056x","node_ip":"10.1.%d.%d","node_instance_id":"node-%d","actor_id":"%032x",`+
			`"actor_name":"SERVE_REPLICA::llm#Model#%08x","worker_id":"%056x","log_file_path":"/serve/replica_llm_Model_%08x.log",`+
			`"replica_id":"%08x","state":"RUNNING","pid":%d,"start_time_s":1767268800.25}`,
			i, i/250, i%250, i, i, i, i, i, i, 1000+i)
	}
	b.WriteString(`]}}}}}`)
	return b.String()
}

// Serve's details list every replica: an answer of 1.5 MiB (3,700 replicas) is read whole.
func TestServeApplicationsLargeAnswer(t *testing.T) {
	body := largeServeAnswer(3700)
	if len(body) < 3<<19 {
		t.Fatalf("the answer is %d bytes, want at least 1.5 MiB", len(body))
	}
	api, _, _ := serveAPI(t, map[string]answer{"GET /api/serve/applications/": {200, body}})
	got, err := api.Applications(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if app := got.Applications["llm"]; app.Status != "RUNNING" || app.Deployments["Model"].Status != "HEALTHY" {
		t.Errorf("details %+v", got)
	}
}

// An answer over the bound is not used, and the error says it was too large rather than malformed.
func TestServeApplicationsOverTheBound(t *testing.T) {
	defer func(n int64) { maxServeBody = n }(maxServeBody)
	maxServeBody = 1 << 20
	api, _, _ := serveAPI(t, map[string]answer{"GET /api/serve/applications/": {200, largeServeAnswer(3700)}})
	_, err := api.Applications(context.Background())
	if err == nil || !strings.Contains(err.Error(), "is larger than 1048576 bytes") {
		t.Fatalf("error %v, want one saying the answer is too large", err)
	}
}

func TestWithTargetCapacity(t *testing.T) {
	for _, tc := range []struct {
		in      string
		percent int32
		want    string
	}{
		{`{"applications":[{"name":"a"}]}`, 50, `{"applications":[{"name":"a"}],"target_capacity":50}`},
		{`{"applications":[],"target_capacity":10}`, 0, `{"applications":[],"target_capacity":0}`},
		{`{}`, 100, `{"target_capacity":100}`},
	} {
		got, err := WithTargetCapacity([]byte(tc.in), tc.percent)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s at %d: %s, %v; want %s", tc.in, tc.percent, got, err, tc.want)
		}
	}
	if _, err := WithTargetCapacity([]byte(`[1]`), 1); err == nil {
		t.Error("a JSON array took a target capacity")
	}
}
