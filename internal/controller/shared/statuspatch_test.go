package shared

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// patchRequest is what the API server received.
type patchRequest struct {
	method, path, contentType string
	ops                       []map[string]any
}

// statusServer answers every request with code and body, recording it.
func statusServer(t *testing.T, code int, body string) (*httptest.Server, *[]patchRequest) {
	t.Helper()
	var got []patchRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, _ := io.ReadAll(req.Body)
		r := patchRequest{method: req.Method, path: req.URL.Path, contentType: req.Header.Get("Content-Type")}
		if err := json.Unmarshal(raw, &r.ops); err != nil {
			t.Errorf("body is not a JSON patch: %v: %s", err, raw)
		}
		got = append(got, r)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(rayv1.AddToScheme(s))
	return s
}

func testStatusWriter(t *testing.T, srv *httptest.Server) Writer {
	t.Helper()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(rayv1.GroupVersion.WithKind("RayCluster"), meta.RESTScopeNamespace)
	mapper.Add(rayv1.GroupVersion.WithKind("RayJob"), meta.RESTScopeNamespace)
	mapper.Add(rayv1.GroupVersion.WithKind("RayService"), meta.RESTScopeNamespace)
	mapper.Add(rayv1.GroupVersion.WithKind("RayCronJob"), meta.RESTScopeNamespace)
	c := fake.NewClientBuilder().WithScheme(testScheme()).WithRESTMapper(mapper).Build()
	return ClientWriter(c, &rest.Config{Host: srv.URL}, srv.Client())
}

func TestUpdateStatusSendsOnlyTheStatusAgainstTheResourceVersion(t *testing.T) {
	srv, got := statusServer(t, http.StatusOK, `{"apiVersion":"ray.io/v1","kind":"RayCluster","metadata":{"name":"ignored"}}`)
	rc := &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", ResourceVersion: "42"},
		Spec:       rayv1.RayClusterSpec{RayVersion: "must not be sent"},
		Status:     rayv1.RayClusterStatus{State: rayv1.Ready, ReadyWorkerReplicas: 3},
	}
	if err := testStatusWriter(t, srv).UpdateStatus(context.Background(), rc); err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	if len(*got) != 1 {
		t.Fatalf("requests = %d, want 1", len(*got))
	}
	r := (*got)[0]
	if r.method != http.MethodPatch || r.path != "/apis/ray.io/v1/namespaces/ns/rayclusters/c/status" || r.contentType != "application/json-patch+json" {
		t.Errorf("request = %s %s (%s), want PATCH /apis/ray.io/v1/namespaces/ns/rayclusters/c/status (application/json-patch+json)", r.method, r.path, r.contentType)
	}
	var want []map[string]any // as the server decodes it, so that key order does not matter
	if err := json.Unmarshal([]byte(mustJSON(t, []jsonPatchOp{
		{Op: "add", Path: "/metadata/resourceVersion", Value: "42"},
		{Op: "add", Path: "/status", Value: rc.Status},
	})), &want); err != nil {
		t.Fatal(err)
	}
	if gotJSON, wantJSON := mustJSON(t, r.ops), mustJSON(t, want); gotJSON != wantJSON || !strings.Contains(gotJSON, `"state":"ready"`) {
		t.Errorf("patch = %s, want %s", gotJSON, wantJSON)
	}
	if rc.Name != "c" || rc.Spec.RayVersion != "must not be sent" {
		t.Errorf("the object was changed from the answer: %+v", rc.ObjectMeta)
	}
}

func TestUpdateStatusConflictIsAConflict(t *testing.T) {
	srv, _ := statusServer(t, http.StatusConflict, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","code":409,
		"message":"Operation cannot be fulfilled on rayclusters.ray.io \"c\": the object has been modified"}`)
	job := &rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", ResourceVersion: "7"}}
	err := testStatusWriter(t, srv).UpdateStatus(context.Background(), job)
	if !apierrors.IsConflict(err) {
		t.Fatalf("err = %v, want a Conflict", err)
	}
}

// Every kind of ray.io/v1 has a status kray writes: each is sent to its own status subresource.
func TestUpdateStatusWritesEveryRayKind(t *testing.T) {
	kinds := testScheme().KnownTypes(rayv1.GroupVersion)
	n := 0
	for kind, typ := range kinds {
		obj, ok := reflect.New(typ).Interface().(client.Object)
		if !ok || !strings.HasPrefix(kind, "Ray") || strings.HasSuffix(kind, "List") {
			continue // the meta types every group version registers, and lists
		}
		n++
		srv, got := statusServer(t, http.StatusOK, `{}`)
		obj.SetNamespace("ns")
		obj.SetName("c")
		obj.SetResourceVersion("1")
		if err := testStatusWriter(t, srv).UpdateStatus(context.Background(), obj); err != nil {
			t.Errorf("%s: %v", kind, err)
			continue
		}
		if want := "/apis/ray.io/v1/namespaces/ns/" + strings.ToLower(kind) + "s/c/status"; len(*got) != 1 || (*got)[0].path != want {
			t.Errorf("%s: requests %+v, want one to %s", kind, *got, want)
		}
	}
	if n < 4 {
		t.Errorf("ray.io/v1 kinds = %d, want at least RayCluster, RayJob, RayService and RayCronJob", n)
	}
}

func TestUpdateStatusRefusesWhatItCannotWrite(t *testing.T) {
	srv, got := statusServer(t, http.StatusOK, `{}`)
	w := testStatusWriter(t, srv)
	for name, obj := range map[string]client.Object{
		"no resourceVersion": &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}},
		"not a kray kind":    &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: "1"}},
	} {
		if err := w.UpdateStatus(context.Background(), obj); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if len(*got) != 0 {
		t.Errorf("requests sent: %d, want 0", len(*got))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
