package raycluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	schedv1alpha1 "github.com/kray-project/kray/api/schedulerplugins/v1alpha1"
	rayv1 "github.com/kray-project/kray/api/v1"
	volcanov1beta1 "github.com/kray-project/kray/api/volcano/v1beta1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/internal/fixture"
	"github.com/kray-project/kray/internal/writetest"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// testNow is the pinned time of every reconcile in these tests.
var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(rayv1.AddToScheme(s))
	utilruntime.Must(kruisev1alpha1.AddToScheme(s))
	utilruntime.Must(kruisev1beta1.AddToScheme(s))
	utilruntime.Must(schedv1alpha1.AddToScheme(s))
	utilruntime.Must(volcanov1beta1.AddToScheme(s))
	return s
}

// clusterFixture is a fluent RayCluster for tests.
type clusterFixture struct{ rc *rayv1.RayCluster }

func cluster(name string) *clusterFixture {
	rc := fixture.Cluster("ns", name)
	rc.TypeMeta = metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayCluster"}
	rc.UID, rc.Generation = types.UID("uid-"+name), 1
	return &clusterFixture{rc: rc}
}

func (f *clusterFixture) group(name string, replicas int32) *clusterFixture {
	f.rc.Spec.WorkerGroupSpecs = append(f.rc.Spec.WorkerGroupSpecs, fixture.Group(name, replicas, 0, 100))
	return f
}

// with applies mutate to the RayCluster.
func (f *clusterFixture) with(mutate func(*rayv1.RayCluster)) *clusterFixture {
	mutate(f.rc)
	return f
}

func (f *clusterFixture) obj() *rayv1.RayCluster { return f.rc.DeepCopy() }

// env is a Reconciler over fake clients: Cache and APIReader read what the recording Writer wrote.
type env struct {
	t      *testing.T
	r      *Reconciler
	api    client.Client
	writer *writetest.Writer
	events *record.FakeRecorder
	clock  *clocktesting.FakePassiveClock
}

// newEnv returns an env whose API server holds objs; cache, when given, is a separate (stale) cache.
func newEnv(t *testing.T, objs ...client.Object) *env {
	t.Helper()
	api := fakeAPI(objs...)
	e := &env{t: t, api: api, writer: writetest.New(api), events: record.NewFakeRecorder(1000), clock: clocktesting.NewFakePassiveClock(testNow)}
	e.r = &Reconciler{
		Cache: api, APIReader: api, Writer: e.writer, Events: shared.Events{Recorder: e.events},
		Options: builder.Options{Version: "test"},
		Clock:   e.clock,
	}
	return e
}

// fakeAPI is a fake API server holding objs; like a real one, it gives every created object a UID and bumps
// a Kruise workload's metadata.generation when an update changes its spec, so that a status Kruise has not
// caught up with (observedGeneration below generation) reads as such.
func fakeAPI(objs ...client.Object) client.Client {
	var uids atomic.Int64
	return withIndexes(fake.NewClientBuilder().WithScheme(testScheme())).WithObjects(objs...).
		WithStatusSubresource(&rayv1.RayCluster{}, &kruisev1alpha1.CloneSet{}, &kruisev1beta1.StatefulSet{}, &corev1.Pod{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if obj.GetUID() == "" {
					obj.SetUID(types.UID(fmt.Sprintf("uid-%d", uids.Add(1))))
				}
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if err := bumpGeneration(ctx, c, obj); err != nil {
					return err
				}
				return c.Update(ctx, obj, opts...)
			},
		}).Build()
}

// bumpGeneration sets obj's generation to the stored one, plus one when obj is a Kruise workload whose spec
// differs from the stored spec.
func bumpGeneration(ctx context.Context, c client.Client, obj client.Object) error {
	var stored, now any
	switch o := obj.(type) {
	case *kruisev1alpha1.CloneSet:
		old := &kruisev1alpha1.CloneSet{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), old); err != nil {
			return client.IgnoreNotFound(err)
		}
		stored, now = old.Spec, o.Spec
		obj.SetGeneration(old.Generation)
	case *kruisev1beta1.StatefulSet:
		old := &kruisev1beta1.StatefulSet{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), old); err != nil {
			return client.IgnoreNotFound(err)
		}
		stored, now = old.Spec, o.Spec
		obj.SetGeneration(old.Generation)
	default:
		return nil
	}
	if !equality.Semantic.DeepEqual(stored, now) {
		obj.SetGeneration(obj.GetGeneration() + 1)
	}
	return nil
}

// withIndexes gives a fake client the cache indexes that SetupWithManager registers.
func withIndexes(b *fake.ClientBuilder) *fake.ClientBuilder {
	for _, obj := range indexedChildren() {
		b = b.WithIndex(obj, indexCluster, clusterOf)
	}
	return b
}

// reconcile runs one reconcile of rc and returns its writes; it fails the test when Reconcile returns a
// result together with an error.
func (e *env) reconcile(rc *rayv1.RayCluster) ([]string, ctrl.Result, error) {
	e.t.Helper()
	e.writer.Reset()
	res, err := e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rc)})
	if err != nil && res != (ctrl.Result{}) {
		e.t.Errorf("Reconcile returned both %+v and %v", res, err)
	}
	var out []string
	for _, w := range e.writer.Writes() {
		out = append(out, w.String())
	}
	return out, res, err
}

// mustReconcile is reconcile that fails the test on an error.
func (e *env) mustReconcile(rc *rayv1.RayCluster) []string {
	e.t.Helper()
	writes, _, err := e.reconcile(rc)
	if err != nil {
		e.t.Fatalf("Reconcile: %v", err)
	}
	return writes
}

// converge reconciles and plays Kruise until a reconcile writes nothing, and fails the test when that takes
// more than a few rounds.
func (e *env) converge(rc *rayv1.RayCluster) {
	e.t.Helper()
	var writes []string
	for range 8 {
		if writes = e.mustReconcile(rc); len(writes) == 0 {
			// A positive control: a spec that kray refused would also write nothing.
			if err := e.api.Get(context.Background(), client.ObjectKey{Namespace: rc.Namespace, Name: names.HeadStatefulSet(rc.Name)}, &kruisev1beta1.StatefulSet{}); err != nil {
				e.t.Fatalf("converged without a head StatefulSet: %v", err)
			}
			return
		}
		e.playKruise(rc)
	}
	e.t.Fatalf("no convergence; the last reconcile wrote %v", writes)
}

// takeEvents returns the events emitted since the last call, as "Type Reason message".
func (e *env) takeEvents() []string {
	var out []string
	for {
		select {
		case ev := <-e.events.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// reasons returns the reasons of events, in order.
func reasons(events []string) []string {
	var out []string
	for _, ev := range events {
		out = append(out, strings.Fields(ev)[1])
	}
	return out
}

// get reads obj from the fake API server.
func (e *env) get(obj client.Object, name string) client.Object {
	e.t.Helper()
	if err := e.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, obj); err != nil {
		e.t.Fatalf("get %T %s: %v", obj, name, err)
	}
	return obj
}

// updateSpec applies mutate to the stored RayCluster's spec, as a user would.
func (e *env) updateSpec(rc *rayv1.RayCluster, mutate func(*rayv1.RayCluster)) {
	e.t.Helper()
	cur := e.get(&rayv1.RayCluster{}, rc.Name).(*rayv1.RayCluster)
	mutate(cur)
	cur.Generation++
	if err := e.api.Update(context.Background(), cur); err != nil {
		e.t.Fatal(err)
	}
}

// pods returns the names of the pods of rc, sorted.
func (e *env) pods(rc *rayv1.RayCluster) []string {
	list := &corev1.PodList{}
	if err := e.api.List(context.Background(), list, client.InNamespace(rc.Namespace), client.MatchingLabels{constants.LabelCluster: rc.Name}); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// playKruise does what kruise-manager would for rc's workloads: creates the pods its
// replicas ask for (running, ready, lifecycle Normal) and deletes the pods podsToDelete names or that exceed
// replicas, then reports the workload updated.
func (e *env) playKruise(rc *rayv1.RayCluster) {
	e.t.Helper()
	e.playKruiseFor(rc)
}

// playKruiseFor is playKruise for only the workloads named (all when none is named): a rollout left
// part-way, with the other workloads' pods and status as they were.
func (e *env) playKruiseFor(rc *rayv1.RayCluster, workloads ...string) {
	e.t.Helper()
	ctx := context.Background()
	plays := func(name string) bool { return len(workloads) == 0 || slices.Contains(workloads, name) }
	sts := &kruisev1beta1.StatefulSet{}
	if err := e.api.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: names.HeadStatefulSet(rc.Name)}, sts); err == nil && plays(sts.Name) {
		rev := revision(sts)
		e.ownPods(sts, "StatefulSet", sts.Spec.Template, rev, ptr.Deref(sts.Spec.Replicas, 1), nil, func(int) string { return names.HeadPod(rc.Name) })
		sts = e.get(&kruisev1beta1.StatefulSet{}, sts.Name).(*kruisev1beta1.StatefulSet)
		n := ptr.Deref(sts.Spec.Replicas, 1)
		sts.Status = kruisev1beta1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: n, ReadyReplicas: n, UpdatedReplicas: n, UpdatedReadyReplicas: n, UpdateRevision: rev}
		if err := e.api.Status().Update(ctx, sts); err != nil {
			e.t.Fatal(err)
		}
	}
	sets := &kruisev1alpha1.CloneSetList{}
	if err := e.api.List(ctx, sets, client.InNamespace(rc.Namespace), client.MatchingLabels{constants.LabelCluster: rc.Name}); err != nil {
		e.t.Fatal(err)
	}
	for i := range sets.Items {
		cs := &sets.Items[i]
		if !plays(cs.Name) {
			continue
		}
		rev := revision(cs)
		e.ownPods(cs, "CloneSet", cs.Spec.Template, rev, ptr.Deref(cs.Spec.Replicas, 0), cs.Spec.ScaleStrategy.PodsToDelete, func(n int) string { return fmt.Sprintf("%s-%05d", cs.Name, n) })
		cs = e.get(&kruisev1alpha1.CloneSet{}, cs.Name).(*kruisev1alpha1.CloneSet)
		n := ptr.Deref(cs.Spec.Replicas, 0)
		cs.Spec.ScaleStrategy.PodsToDelete = nil
		if err := e.api.Update(ctx, cs); err != nil {
			e.t.Fatal(err)
		}
		cs.Status = kruisev1alpha1.CloneSetStatus{ObservedGeneration: cs.Generation, Replicas: n, ReadyReplicas: n, UpdatedReplicas: n, UpdatedReadyReplicas: n, ExpectedUpdatedReplicas: n, UpdateRevision: rev}
		if err := e.api.Status().Update(ctx, cs); err != nil {
			e.t.Fatal(err)
		}
	}
}

// revision names a workload's current template as Kruise would: the workload's name and a hash (here, the
// spec hash kray wrote).
func revision(w client.Object) string {
	return w.GetName() + "-" + w.GetAnnotations()[constants.AnnotationSpecHash]
}

// ownPods makes its pods match replicas and podsToDelete, at revision: new pods, and kept ones updated in place.
func (e *env) ownPods(w client.Object, kind string, tmpl corev1.PodTemplateSpec, revision string, replicas int32, toDelete []string, name func(int) string) {
	e.t.Helper()
	ctx := context.Background()
	list := &corev1.PodList{}
	if err := e.api.List(ctx, list, client.InNamespace(w.GetNamespace())); err != nil {
		e.t.Fatal(err)
	}
	var live []corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == w.GetUID() {
			live = append(live, p)
		}
	}
	var keep []corev1.Pod
	for _, p := range live {
		if slices.Contains(toDelete, p.Name) {
			if err := e.api.Delete(ctx, &p); err != nil {
				e.t.Fatal(err)
			}
			continue
		}
		keep = append(keep, p)
	}
	for int32(len(keep)) > replicas {
		if err := e.api.Delete(ctx, &keep[len(keep)-1]); err != nil {
			e.t.Fatal(err)
		}
		keep = keep[:len(keep)-1]
	}
	live = keep
	for i := range live {
		// Kruise updates the pods it keeps to revision (in place, as kray's RollingUpdate asks).
		if p := &live[i]; p.Labels[appsv1.ControllerRevisionHashLabelKey] != revision {
			p.Labels[appsv1.ControllerRevisionHashLabelKey] = revision
			for c := range p.Spec.Containers {
				if c < len(tmpl.Spec.Containers) {
					p.Spec.Containers[c].Image = tmpl.Spec.Containers[c].Image
				}
			}
			if err := e.api.Update(ctx, p); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	for n := 0; int32(len(live)) < replicas; n++ {
		p := podFromTemplate(w, kind, tmpl, revision, name(n))
		if err := e.api.Create(ctx, p); err != nil {
			continue // the name is taken; try the next one
		}
		live = append(live, *p)
	}
}

// podFromTemplate is a running, ready pod at revision that the workload w controls.
func podFromTemplate(w client.Object, kind string, tmpl corev1.PodTemplateSpec, revision, name string) *corev1.Pod {
	labels := map[string]string{constants.LabelKruiseLifecycleState: constants.KruiseStateNormal, appsv1.ControllerRevisionHashLabelKey: revision}
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	gv := kruisev1alpha1.GroupVersion.String()
	if kind == "StatefulSet" {
		gv = kruisev1beta1.GroupVersion.String()
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.GetNamespace(), Labels: labels, Annotations: tmpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gv, Kind: kind, Name: w.GetName(), UID: w.GetUID(), Controller: ptr.To(true)}}},
		Spec: *tmpl.Spec.DeepCopy(),
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			{Type: constants.ReadinessGateInPlaceUpdate, Status: corev1.ConditionTrue},
		}},
	}
}

func objKey(obj client.Object) client.ObjectKey { return client.ObjectKeyFromObject(obj) }
