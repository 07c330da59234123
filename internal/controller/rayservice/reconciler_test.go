package rayservice

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/cachetest"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/internal/writetest"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/dashboard"
)

// fakeServe is every cluster's Serve API, recording the configs applied per base URL.
type fakeServe struct {
	mu      sync.Mutex
	apps    map[string]map[string]dashboard.ServeApplication
	applied map[string][]string
}

func (f *fakeServe) Serve(base, _ string) dashboard.ServeAPI { return &fakeServeAPI{f: f, base: base} }

type fakeServeAPI struct {
	f    *fakeServe
	base string
}

func (a *fakeServeAPI) Applications(context.Context) (*dashboard.ServeDetails, error) {
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	return &dashboard.ServeDetails{Applications: a.f.apps[a.base]}, nil
}

func (a *fakeServeAPI) Apply(_ context.Context, config []byte) error {
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	a.f.applied[a.base] = append(a.f.applied[a.base], string(config))
	a.f.apps[a.base] = map[string]dashboard.ServeApplication{"fruit": {Status: "RUNNING"}}
	return nil
}

// renv is a RayService reconciler against a fake API server that assigns UIDs, with the recording writer.
type renv struct {
	t   *testing.T
	api client.Client
	// cache is the reconciler's informer cache: the real label filters, synced before each reconcile
	// unless lagging is set.
	cache   *cachetest.Cache
	lagging bool
	// all are the writes of every reconcile so far.
	all    []string
	writer *writetest.Writer
	serve  *fakeServe
	r      *Reconciler
	n      int
}

func newRenv(t *testing.T, objs ...client.Object) *renv {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, rayv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	uids := 0
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&rayv1.RayService{}, &rayv1.RayCluster{}).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			uids++
			obj.SetUID(types.UID(fmt.Sprintf("uid-%d", uids)))
			return c.Create(ctx, obj, opts...)
		}}).Build()
	proxies := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(proxies.Close)
	cache, err := cachetest.New(api, scheme, raycluster.CacheOptions(nil),
		&rayv1.RayServiceList{}, &rayv1.RayClusterList{}, &corev1.PodList{}, &corev1.ServiceList{})
	if err != nil {
		t.Fatal(err)
	}
	e := &renv{t: t, api: api, cache: cache, writer: writetest.New(api), serve: &fakeServe{apps: map[string]map[string]dashboard.ServeApplication{}, applied: map[string][]string{}}}
	e.r = &Reconciler{Cache: cache, APIReader: api, Writer: e.writer, Events: shared.Events{Recorder: record.NewFakeRecorder(100)},
		Dashboards: e.serve, DashboardAddress: "http://dash/{namespace}/{cluster}", ZeroDowntime: true,
		ServeProbeAddress: proxies.URL + "/{namespace}/{pod}", ProbeHTTP: proxies.Client(),
		Clock: clocktesting.NewFakePassiveClock(t0),
		Suffix: func() string {
			e.n++
			return fmt.Sprintf("n%04d", e.n)
		}}
	return e
}

// reconcile runs one reconcile of svc and returns its writes.
func (e *renv) reconcile(svc *rayv1.RayService) ([]string, error) {
	e.t.Helper()
	e.writer.Reset()
	if !e.lagging {
		if err := e.cache.Sync(context.Background()); err != nil {
			e.t.Fatal(err)
		}
	}
	_, err := e.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(svc)})
	var out []string
	for _, w := range e.writer.Writes() {
		out = append(out, w.String())
	}
	e.all = append(e.all, out...)
	return out, err
}

// serveFromPending names and creates svc's pending cluster, starts its pods (a head and a serving worker)
// and reconciles until that cluster is the active one; it returns the cluster's name.
func (e *renv) serveFromPending(svc *rayv1.RayService) string {
	e.t.Helper()
	var name string
	for range 3 {
		if name = e.get(svc).Status.PendingServiceStatus.RayClusterName; name != "" {
			break
		}
		if _, err := e.reconcile(svc); err != nil {
			e.t.Fatal(err)
		}
	}
	if name == "" {
		e.t.Fatalf("no pending cluster named: %+v", e.get(svc).Status)
	}
	for _, p := range []corev1.Pod{pod(name, constants.NodeTypeHead, "false"), pod(name, constants.NodeTypeWorker, "true")} {
		if err := e.api.Create(context.Background(), &p); err != nil {
			e.t.Fatal(err)
		}
	}
	for range 6 {
		if _, err := e.reconcile(svc); err != nil {
			e.t.Fatal(err)
		}
		if e.get(svc).Status.ActiveServiceStatus.RayClusterName == name {
			return name
		}
	}
	e.t.Fatalf("not serving from %s: %+v", name, e.get(svc).Status)
	return ""
}

func (e *renv) get(svc *rayv1.RayService) *rayv1.RayService {
	e.t.Helper()
	cur := &rayv1.RayService{}
	if err := e.api.Get(context.Background(), client.ObjectKeyFromObject(svc), cur); err != nil {
		e.t.Fatal(err)
	}
	return cur
}

// A cluster is created only under a name the status holds: a status write that fails after naming one
// creates nothing, and the next reconcile names and then creates exactly one cluster.
func TestReconcileNamesBeforeCreating(t *testing.T) {
	svc := service()
	svc.Finalizers = []string{constants.FinalizerRayService}
	e := newRenv(t, svc)
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "ray.io", Resource: "rayservices"}, svc.Name, errors.New("modified"))
	e.writer.FailOnce(writetest.Status, "RayService", svc.Name, conflict)
	if writes, err := e.reconcile(svc); err != nil || !cmp.Equal(writes, []string{"status RayService/svc"}) {
		t.Fatalf("first reconcile: %v, %v; want only the (failed) status write", writes, err)
	}
	if got := e.get(svc).Status.PendingServiceStatus.RayClusterName; got != "" {
		t.Fatalf("a name was stored though its write failed: %q", got)
	}
	if writes, _ := e.reconcile(svc); !cmp.Equal(writes, []string{"status RayService/svc"}) {
		t.Fatalf("second reconcile: %v, want the name written alone", writes)
	}
	name := e.get(svc).Status.PendingServiceStatus.RayClusterName
	writes, err := e.reconcile(svc)
	if err != nil || !cmp.Equal(writes, []string{"create RayCluster/" + name}) {
		t.Fatalf("third reconcile: %v, %v; want %s created", writes, err, name)
	}
	if writes, _ := e.reconcile(svc); len(writes) != 0 {
		t.Errorf("fourth reconcile: %v, want nothing more", writes)
	}
}

// KubeRay v1.7's ray.io/rayservice-finalizer is added before anything else is written, once; a RayService
// managed by MultiKueue gets none.
func TestReconcileAddsKubeRaysFinalizerFirst(t *testing.T) {
	svc := service()
	e := newRenv(t, svc)
	if writes, err := e.reconcile(svc); err != nil || !cmp.Equal(writes, []string{"patch RayService/svc"}) {
		t.Fatalf("first reconcile: %v, %v; want the finalizer patch alone", writes, err)
	}
	if got := e.get(svc).Finalizers; !slices.Equal(got, []string{constants.FinalizerRayService}) {
		t.Fatalf("finalizers %v", got)
	}
	if writes, _ := e.reconcile(svc); !cmp.Equal(writes, []string{"status RayService/svc"}) {
		t.Errorf("second reconcile: %v, want the work to start", writes)
	}
	managed := service()
	managed.Name = "elsewhere"
	managed.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue")
	e = newRenv(t, managed)
	if writes, _ := e.reconcile(managed); len(writes) != 0 {
		t.Errorf("a RayService managed by MultiKueue: %v, want no write", writes)
	}
}

// A cluster of the stored name that the RayService does not control is neither used nor changed: the
// RayService names another pending cluster, says why, and serves from its own.
func TestReconcileRefusesSomeoneElsesCluster(t *testing.T) {
	svc := service()
	svc.Finalizers = []string{constants.FinalizerRayService}
	svc.Status.PendingServiceStatus.RayClusterName = "svc-taken"
	foreign := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "svc-taken", Namespace: "ns"}}
	e := newRenv(t, svc, foreign)
	if writes, err := e.reconcile(svc); err != nil || !cmp.Equal(writes, []string{"status RayService/svc"}) {
		t.Fatalf("first reconcile: %v, %v; want only the new name written", writes, err)
	}
	rec := e.r.Events.Recorder.(*record.FakeRecorder)
	if ev := <-rec.Events; !strings.Contains(ev, shared.EventFailedToCreateRayCluster) || !strings.Contains(ev, "svc-taken exists and is not controlled by RayService ns/svc") {
		t.Errorf("event %q, want one naming the foreign cluster", ev)
	}
	name := e.serveFromPending(svc)
	if name == "svc-taken" {
		t.Fatal("serving from the other's cluster")
	}
	for _, w := range e.all {
		if strings.HasSuffix(w, "RayCluster/svc-taken") {
			t.Errorf("kray wrote to the other's cluster: %s", w)
		}
	}
}

// The Serve config is applied once per cluster: a reconcile that finds it running applies nothing, and a
// status whose only change is the cluster's status copy is not written.
func TestReconcileAppliesServeOnce(t *testing.T) {
	svc := service()
	e := newRenv(t, svc)
	name := e.serveFromPending(svc)
	base := "http://dash/ns/" + name
	if got := e.serve.applied[base]; len(got) != 1 {
		t.Fatalf("configs applied on %s: %d, want 1", base, len(got))
	}
	rc := &rayv1.RayCluster{}
	if err := e.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, rc); err != nil {
		t.Fatal(err)
	}
	rc.Status.ReadyWorkerReplicas = 7
	if err := e.api.Status().Update(context.Background(), rc); err != nil {
		t.Fatal(err)
	}
	if writes, _ := e.reconcile(svc); len(writes) != 0 {
		t.Errorf("writes %v for a change of the cluster's status alone", writes)
	}
}

// A RayService made by KubeRay has head and serve Services without the ray.io/cluster label, which the
// operator's cache never holds: an upgrade reads them from the API server once their create is refused,
// points them at the new cluster (labelling them), promotes it and then writes nothing more.
func TestReconcileUpgradeMovesServicesMadeByKubeRay(t *testing.T) {
	svc := service()
	e := newRenv(t, svc)
	old := e.serveFromPending(svc)
	ctx := context.Background()
	for _, name := range []string{HeadServiceName(svc), ServeServiceName(svc)} {
		s := &corev1.Service{}
		if err := e.api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, s); err != nil {
			t.Fatal(err)
		}
		s.Labels = nil
		if err := e.api.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	cur := e.get(svc)
	cur.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
	if err := e.api.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	next := e.serveFromPending(svc)
	if next == old {
		t.Fatalf("no new cluster for the changed spec: %s", next)
	}
	for _, name := range []string{HeadServiceName(svc), ServeServiceName(svc)} {
		s := &corev1.Service{}
		if err := e.api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, s); err != nil {
			t.Fatal(err)
		}
		if s.Spec.Selector[constants.LabelCluster] != next || s.Labels[constants.LabelCluster] != next {
			t.Errorf("Service %s selects %q, labelled %q; want %s", name, s.Spec.Selector[constants.LabelCluster], s.Labels[constants.LabelCluster], next)
		}
	}
	st := e.get(svc).Status
	if st.PendingServiceStatus.RayClusterName != "" {
		t.Errorf("still pending: %+v", st.PendingServiceStatus)
	}
	if c := meta.FindStatusCondition(st.Conditions, string(rayv1.UpgradeInProgress)); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("UpgradeInProgress %+v, want False", c)
	}
	if writes, err := e.reconcile(svc); err != nil || slices.ContainsFunc(writes, func(w string) bool { return strings.Contains(w, "Service/") }) {
		t.Errorf("a promoted RayService still writes its Services: %v, %v", writes, err)
	}
}

// A deleted RayService that carries KubeRay v1.7's ray.io/rayservice-finalizer is let go once its own
// clusters are deleted; someone else's cluster is left alone, and one without the finalizer is not written.
func TestReconcileReleasesKubeRaysFinalizer(t *testing.T) {
	svc := service()
	svc.Finalizers = []string{constants.FinalizerRayService}
	svc.DeletionTimestamp = &metav1.Time{Time: t0}
	own := Cluster(svc, "svc-own")
	foreign := Cluster(svc, "svc-foreign")
	foreign.OwnerReferences = nil
	e := newRenv(t, svc, own, foreign)
	writes, err := e.reconcile(svc)
	if err != nil || !cmp.Equal(writes, []string{"delete RayCluster/svc-own"}) {
		t.Fatalf("first reconcile: %v, %v; want the own cluster deleted and the finalizer kept", writes, err)
	}
	writes, err = e.reconcile(svc)
	if err != nil || !cmp.Equal(writes, []string{"patch RayService/svc"}) {
		t.Fatalf("once the cluster is gone: %v, %v; want the finalizer removed", writes, err)
	}
	if err := e.api.Get(context.Background(), client.ObjectKeyFromObject(svc), &rayv1.RayService{}); !apierrors.IsNotFound(err) {
		t.Errorf("the RayService is still stored: %v", err)
	}
	if err := e.api.Get(context.Background(), client.ObjectKeyFromObject(foreign), &rayv1.RayCluster{}); err != nil {
		t.Errorf("someone else's cluster: %v, want it kept", err)
	}

	plain := service()
	plain.Finalizers = []string{"example.com/other"}
	plain.DeletionTimestamp = &metav1.Time{Time: t0}
	e = newRenv(t, plain, Cluster(plain, "svc-own"))
	if writes, err := e.reconcile(plain); err != nil || len(writes) != 0 {
		t.Errorf("without KubeRay's finalizer: %v, %v; want no write", writes, err)
	}
}

// A RayService that MultiKueue manages is another controller's: kray writes nothing for it.
func TestReconcileLeavesAnotherControllersRayService(t *testing.T) {
	svc := service()
	svc.Spec.ManagedBy = ptr.To(rayv1.MultiKueueManagedBy)
	e := newRenv(t, svc)
	for range 3 {
		if writes, err := e.reconcile(svc); err != nil || len(writes) != 0 {
			t.Fatalf("writes %v, %v; want none", writes, err)
		}
	}
	svc.Spec.ManagedBy = ptr.To(rayv1.KubeRayOperatorManagedBy)
	e = newRenv(t, svc)
	if writes, err := e.reconcile(svc); err != nil || len(writes) == 0 {
		t.Fatalf("managed by the KubeRay operator: writes %v, %v; want the first cluster named (positive control)", writes, err)
	}
}

// What a cluster's Serve accepted is recorded on the cluster, so that a restarted operator (a new
// Reconciler, with nothing in memory) knows it: it puts nothing again, and the record names the config.
func TestReconcileAppliedConfigSurvivesARestart(t *testing.T) {
	svc := service()
	e := newRenv(t, svc)
	name := e.serveFromPending(svc)
	base := "http://dash/ns/" + name
	if got := e.serve.applied[base]; len(got) != 1 {
		t.Fatalf("configs applied on %s: %d, want 1", base, len(got))
	}
	old := e.r
	e.r = &Reconciler{Cache: old.Cache, APIReader: old.APIReader, Writer: old.Writer, Events: shared.Events{Recorder: old.Events.Recorder}, Dashboards: old.Dashboards,
		DashboardAddress: old.DashboardAddress, ServeProbeAddress: old.ServeProbeAddress, ProbeHTTP: old.ProbeHTTP,
		ZeroDowntime: old.ZeroDowntime, Clock: old.Clock, Suffix: old.Suffix}
	for range 3 {
		if _, err := e.reconcile(svc); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.serve.applied[base]; len(got) != 1 {
		t.Errorf("configs applied on %s after the restart: %d, want still 1", base, len(got))
	}
	rc := &rayv1.RayCluster{}
	if err := e.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, rc); err != nil {
		t.Fatal(err)
	}
	if got, ok := appliedOf(rc); !ok || got.Config != serveConfig || got.Capacity != nil {
		t.Errorf("recorded %+v (%v), want the spec's config with no target capacity", got, ok)
	}
}
