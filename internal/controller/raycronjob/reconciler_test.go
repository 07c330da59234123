package raycronjob

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/internal/writetest"
)

type env struct {
	api    client.Client
	writer *writetest.Writer
	rec    *record.FakeRecorder
	clock  *clocktesting.FakePassiveClock
}

func newEnv(t *testing.T, objs ...client.Object) *env {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := rayv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&rayv1.RayCronJob{}).Build()
	return &env{api: api, writer: writetest.New(api), rec: record.NewFakeRecorder(100), clock: clocktesting.NewFakePassiveClock(t0)}
}

// reconciler is a fresh Reconciler (as after an operator restart, or another instance) reading cache.
func (e *env) reconciler(cache client.Reader) *Reconciler {
	return &Reconciler{Cache: cache, APIReader: e.api, Writer: e.writer, Events: shared.Events{Recorder: e.rec}, Clock: e.clock}
}

func (e *env) reconcile(t *testing.T, r *Reconciler) reconcile.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "nightly"}})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

func (e *env) jobs(t *testing.T) []rayv1.RayJob {
	t.Helper()
	var l rayv1.RayJobList
	if err := e.api.List(context.Background(), &l); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func (e *env) cronJob(t *testing.T) *rayv1.RayCronJob {
	t.Helper()
	cj := &rayv1.RayCronJob{}
	if err := e.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "nightly"}, cj); err != nil {
		t.Fatal(err)
	}
	return cj
}

func (e *env) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.rec.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func TestReconcileStartsEachTimeOnce(t *testing.T) {
	e := newEnv(t, cronJob())
	r := e.reconciler(e.api)
	e.clock.SetTime(t0.Add(5*time.Minute + 30*time.Second))
	if res := e.reconcile(t, r); res.RequeueAfter != 4*time.Minute+30*time.Second {
		t.Errorf("RequeueAfter = %s, want until 00:10", res.RequeueAfter)
	}
	jobs := e.jobs(t)
	if len(jobs) != 1 || jobs[0].Name != "nightly-28401125" {
		t.Fatalf("RayJobs = %v, want nightly-28401125", jobs)
	}
	if got := e.cronJob(t).Status.LastScheduleTime; got == nil || !got.Time.Equal(t0.Add(5*time.Minute)) {
		t.Errorf("lastScheduleTime = %v", got)
	}
	if ev := e.events(); len(ev) != 1 || !strings.Contains(ev[0], "Normal CreatedRayJob Created RayJob ns/nightly-28401125 for the schedule time 2024-01-01T00:05:00Z") {
		t.Errorf("events = %q", ev)
	}
	e.writer.Reset()
	e.reconcile(t, e.reconciler(e.api)) // a restart at the same moment
	if w := e.writer.Writes(); len(w) != 0 {
		t.Errorf("a second reconcile of the same time wrote %v", w)
	}
}

// staleCache serves a RayCronJob whose status is an older one, as an informer that has not seen the last
// status write.
type staleCache struct {
	client.Reader
	status rayv1.RayCronJobStatus
}

func (c staleCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if cj, ok := obj.(*rayv1.RayCronJob); ok {
		cj.Status = *c.status.DeepCopy()
	}
	return nil
}

func TestReconcileOnAStaleCacheStartsNothingTwice(t *testing.T) {
	e := newEnv(t, cronJob())
	e.clock.SetTime(t0.Add(5*time.Minute + 30*time.Second))
	e.reconcile(t, e.reconciler(e.api))
	e.events()
	// Another instance whose cache has not seen the status write: the time looks due again.
	r := e.reconciler(staleCache{Reader: e.api})
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "nightly"}}); err != nil {
		t.Fatal(err)
	}
	if len(e.jobs(t)) != 1 {
		t.Errorf("RayJobs = %d, want 1", len(e.jobs(t)))
	}
	if ev := e.events(); len(ev) != 0 {
		t.Errorf("events = %q, want none (the RayJob is this RayCronJob's)", ev)
	}
}

func TestReconcileOfTwoInstancesAtOnceStartsOneRayJob(t *testing.T) {
	e := newEnv(t, cronJob())
	e.clock.SetTime(t0.Add(5*time.Minute + 30*time.Second))
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = e.reconciler(e.api).Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "nightly"}})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := len(e.jobs(t)); n != 1 {
		t.Errorf("RayJobs = %d, want 1", n)
	}
}

func TestReconcileNeverTakesASomeoneElsesRayJob(t *testing.T) {
	foreign := &rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly-28401125", Labels: map[string]string{"owner": "someone"}}}
	e := newEnv(t, cronJob(), foreign)
	e.clock.SetTime(t0.Add(5*time.Minute + 30*time.Second))
	e.reconcile(t, e.reconciler(e.api))
	jobs := e.jobs(t)
	if len(jobs) != 1 || jobs[0].Labels["owner"] != "someone" || len(jobs[0].OwnerReferences) != 0 {
		t.Errorf("RayJobs = %+v, want the foreign one untouched", jobs)
	}
	if got := e.cronJob(t).Status.LastScheduleTime; got == nil || !got.Time.Equal(t0.Add(5*time.Minute)) {
		t.Errorf("lastScheduleTime = %v, want the skipped time stored", got)
	}
	if ev := e.events(); len(ev) != 1 || !strings.Contains(ev[0], "Warning FailedToCreateRayJob RayJob ns/nightly-28401125 exists and is not controlled by this RayCronJob") {
		t.Errorf("events = %q", ev)
	}
}

func TestReconcileRetriesATimeWhoseCreateFailed(t *testing.T) {
	e := newEnv(t, cronJob())
	e.clock.SetTime(t0.Add(5*time.Minute + 30*time.Second))
	e.writer.FailOnce(writetest.Create, "RayJob", "nightly-28401125", apierrors.NewInternalError(errors.New("etcd down")))
	if _, err := e.reconciler(e.api).Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "nightly"}}); err == nil {
		t.Fatal("a failed create was not an error")
	}
	if e.cronJob(t).Status.LastScheduleTime != nil {
		t.Fatal("the time was stored as run though its RayJob was not created")
	}
	e.reconcile(t, e.reconciler(e.api))
	if len(e.jobs(t)) != 1 || e.cronJob(t).Status.LastScheduleTime == nil {
		t.Errorf("the retry did not start the time: %d RayJobs", len(e.jobs(t)))
	}
}

func TestReconcileStatusConflictIsRetriedWithoutASecondRayJob(t *testing.T) {
	e := newEnv(t, cronJob())
	e.clock.SetTime(t0.Add(5*time.Minute + 30*time.Second))
	e.writer.FailOnce(writetest.Status, "RayCronJob", "nightly", apierrors.NewConflict(schema.GroupResource{Group: "ray.io", Resource: "raycronjobs"}, "nightly", errors.New("stale")))
	if res := e.reconcile(t, e.reconciler(e.api)); res.RequeueAfter != shared.ConflictRetry {
		t.Errorf("RequeueAfter = %s, want %s", res.RequeueAfter, shared.ConflictRetry)
	}
	e.reconcile(t, e.reconciler(e.api))
	if len(e.jobs(t)) != 1 || e.cronJob(t).Status.LastScheduleTime == nil {
		t.Errorf("after the conflict: %d RayJobs, lastScheduleTime %v", len(e.jobs(t)), e.cronJob(t).Status.LastScheduleTime)
	}
}
