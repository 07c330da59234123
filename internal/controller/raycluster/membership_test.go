package raycluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/internal/writetest"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/membership"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/ray"
)

// membershipEnv converges cluster "c" with two workers and a GCS that lists nodes, then makes every pod
// run: the head's Ray container started headStarted ago and became ready 10 s later, each worker's started
// workerStarted ago and is ready. A head younger than its workers was replaced while the operator watched: it
// saw the workers with the head's run before, a minute before the new one started.
func membershipEnv(t *testing.T, headStarted, workerStarted time.Duration, nodes []ray.Node, mutate ...func(*rayv1.RayCluster)) (*env, *fakeRay, *rayv1.RayCluster) {
	t.Helper()
	rc := cluster("c").group("g", 2).with(func(rc *rayv1.RayCluster) {
		for _, m := range mutate {
			m(rc)
		}
	}).obj()
	e := newEnv(t, rc)
	gcs := &fakeRay{nodes: nodes}
	e.r.Ray = gcs
	e.r.Writer = kruiseWebhook{Writer: e.r.Writer, from: e.api}
	e.converge(rc)
	run := func(headStarted time.Duration) {
		for _, name := range e.pods(rc) {
			p := e.get(&corev1.Pod{}, name).(*corev1.Pod)
			started, ready := testNow.Add(-workerStarted), testNow.Add(-workerStarted)
			p.Status.PodIP = workerIP(slices.Index(workers, p.Name))
			if p.Labels[constants.LabelNodeType] == string(rayv1.HeadNode) {
				started, ready = testNow.Add(-headStarted), testNow.Add(-headStarted+10*time.Second)
				p.Status.PodIP = headIP
			}
			p.Status.PodIPs = []corev1.PodIP{{IP: p.Status.PodIP}}
			runContainer(t, e, p, started, ready, true)
		}
	}
	if headStarted < workerStarted {
		run(workerStarted)
		e.clock.SetTime(testNow.Add(-headStarted - time.Minute))
		e.mustReconcile(rc)
		e.clock.SetTime(testNow)
	}
	run(headStarted)
	e.takeEvents()
	return e, gcs, rc
}

// runContainer sets the pod's Ray container running since started, with a container ID of that run, and
// its Ready condition to ready since readySince.
func runContainer(t *testing.T, e *env, p *corev1.Pod, started, readySince time.Time, ready bool) {
	t.Helper()
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: p.Spec.Containers[0].Name, ContainerID: "containerd://" + p.Name + "-" + started.Format("150405"), Ready: ready,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}},
	}}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			p.Status.Conditions[i].Status, p.Status.Conditions[i].LastTransitionTime = status, metav1.NewTime(readySince)
		}
	}
	if err := e.api.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// restarts are the ContainerRecreateRequests in the API server, by pod name.
func (e *env) restarts() map[string]*kruisev1alpha1.ContainerRecreateRequest {
	list := &kruisev1alpha1.ContainerRecreateRequestList{}
	if err := e.api.List(context.Background(), list); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]*kruisev1alpha1.ContainerRecreateRequest{}
	for i := range list.Items {
		out[list.Items[i].Spec.PodName] = &list.Items[i]
	}
	return out
}

var (
	workers   = []string{"c-g-worker-00000", "c-g-worker-00001"}
	headIP    = "10.0.0.100"
	headNode  = ray.Node{ID: []byte("h"), InstanceID: "c-head-0", IP: headIP, Status: ray.NodeStatusRunning}
	bothNodes = []ray.Node{headNode,
		{ID: []byte("n0"), InstanceID: workers[0], IP: workerIP(0), Status: ray.NodeStatusIdle},
		{ID: []byte("n1"), InstanceID: workers[1], IP: workerIP(1), Status: ray.NodeStatusIdle}}
)

// workerIP is the IP of worker pod i (of workers); a pod not among them gets one of its own too.
func workerIP(i int) string {
	return fmt.Sprintf("10.0.1.%d", i+10)
}

// pastHeadReplacedGrace reconciles rc at the new GCS's first answer and once its workers' grace has passed.
func (e *env) pastHeadReplacedGrace(rc *rayv1.RayCluster) []string {
	e.t.Helper()
	e.clock.SetTime(testNow)
	e.mustReconcile(rc)
	e.clock.SetTime(testNow.Add(membership.DefaultHeadReplacedGrace))
	return e.mustReconcile(rc)
}

// A head replaced without GCS fault tolerance: the workers that registered with the old GCS and that the new
// one does not list for the grace are restarted in place, each once, whatever a second reconcile or a second
// operator instance sees; the condition says so while the restarts run.
func TestWorkersOfAReplacedHeadRestartInPlaceOnce(t *testing.T) {
	e, _, rc := membershipEnv(t, 20*time.Second, 10*time.Minute, []ray.Node{headNode})
	writes := e.pastHeadReplacedGrace(rc)
	got := e.restarts()
	if len(got) != 2 {
		t.Fatalf("restarts for %d pods, want both workers (writes %v)", len(got), writes)
	}
	for _, w := range workers {
		crr := got[w]
		if crr == nil || crr.Spec.Containers[0].Name != "ray-worker" || crr.Annotations[constants.AnnotationRestartReason] != "HeadReplaced" {
			t.Fatalf("restart of %s = %+v, want its ray-worker container restarted for HeadReplaced", w, crr)
		}
		if !ownedBy(crr, e.get(&rayv1.RayCluster{}, "c").(*rayv1.RayCluster)) {
			t.Errorf("restart of %s is not controlled by the RayCluster", w)
		}
	}
	if n := strings.Count(strings.Join(e.takeEvents(), "\n"), EventRestartedWorker); n != 2 {
		t.Errorf("%d RestartedWorker events, want 2", n)
	}
	cond := meta.FindStatusCondition(e.get(&rayv1.RayCluster{}, "c").(*rayv1.RayCluster).Status.Conditions, constants.ConditionWorkersRestarting)
	if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, workers[0]) {
		t.Errorf("condition %s = %+v, want True naming the workers", constants.ConditionWorkersRestarting, cond)
	}

	// The containers have not restarted yet: neither this operator nor a second instance, which times the
	// loss from its own first answer, asks again.
	other := &Reconciler{Cache: e.api, APIReader: e.api, Writer: writetest.New(e.api), Events: shared.Events{Recorder: e.events}, Options: e.r.Options, Clock: e.clock, Ray: e.r.Ray}
	for _, d := range []time.Duration{31 * time.Second, 62 * time.Second} {
		e.clock.SetTime(testNow.Add(d))
		for _, r := range []*Reconciler{e.r, other} {
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rc)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := len(e.restarts()); n != 2 {
		t.Errorf("%d restarts after more reconciles, want still 2", n)
	}
	if n := strings.Count(strings.Join(e.takeEvents(), "\n"), EventRestartedWorker); n != 0 {
		t.Errorf("%d more RestartedWorker events, want none", n)
	}

	// Restarted, the workers register with the new GCS: nothing more is asked, and the condition goes.
	e.r.Ray.(*fakeRay).nodes = bothNodes
	for _, w := range workers {
		runContainer(t, e, e.get(&corev1.Pod{}, w).(*corev1.Pod), testNow.Add(70*time.Second), testNow.Add(75*time.Second), true)
	}
	e.mustReconcile(rc)
	if n := len(e.restarts()); n != 2 {
		t.Errorf("%d restarts after the restarts, want 2", n)
	}
	if c := meta.FindStatusCondition(e.get(&rayv1.RayCluster{}, "c").(*rayv1.RayCluster).Status.Conditions, constants.ConditionWorkersRestarting); c != nil {
		t.Errorf("condition %s still there once the workers are back: %+v", constants.ConditionWorkersRestarting, c)
	}
}

// Workers that the GCS lists, a GCS that does not answer, and the switch turned off: nothing is restarted,
// however long the reconciles go on. In the steady state the GCS is asked once per head run (kray's memory
// starts with the operator), once more BindAfter later to bind the workers' runs to its cluster ID, then no more.
func TestWorkersThatAreNotLostAreLeftAlone(t *testing.T) {
	cases := []struct {
		name          string
		headStarted   time.Duration
		workerStarted time.Duration
		nodes         []ray.Node
		gcsErr        bool
		mutate        func(*rayv1.RayCluster)
		// dials is how many times the GCS is asked over the reconciles.
		dials int
	}{
		{name: "steady state", headStarted: time.Hour, workerStarted: 10 * time.Minute, nodes: bothNodes, dials: 2},
		{name: "head replaced, workers reconnected", headStarted: 20 * time.Second, workerStarted: 10 * time.Minute, nodes: bothNodes, dials: 1},
		{name: "head replaced, GCS not answering", headStarted: 20 * time.Second, workerStarted: 10 * time.Minute, gcsErr: true},
		{name: "healing turned off", headStarted: 20 * time.Second, workerStarted: 10 * time.Minute, nodes: []ray.Node{headNode},
			mutate: func(rc *rayv1.RayCluster) {
				rc.Annotations = map[string]string{constants.AnnotationWorkerHealing: "false"}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mutate []func(*rayv1.RayCluster)
			if tc.mutate != nil {
				mutate = append(mutate, tc.mutate)
			}
			e, gcs, rc := membershipEnv(t, tc.headStarted, tc.workerStarted, tc.nodes, mutate...)
			gcs.tokens = nil
			if tc.gcsErr {
				e.r.Ray = failingRay{}
			}
			for _, d := range []time.Duration{0, 40 * time.Second, 70 * time.Second, 5 * time.Minute} {
				e.clock.SetTime(testNow.Add(d))
				if writes := e.mustReconcile(rc); len(e.restarts()) != 0 {
					t.Fatalf("%d restarts at +%s, want none (writes %v)", len(e.restarts()), d, writes)
				}
			}
			if !tc.gcsErr && len(gcs.tokens) != tc.dials {
				t.Errorf("GCS asked %d times, want %d", len(gcs.tokens), tc.dials)
			}
		})
	}
}

// With fault tolerance, a worker that stays not ready and out of the GCS (a zombie) is restarted once the GCS
// has not listed it for the grace; before, kray only looks again when the grace ends.
func TestZombieWorkerRestartsAfterTheGrace(t *testing.T) {
	ft := func(rc *rayv1.RayCluster) {
		rc.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379"}
	}
	nodes := []ray.Node{headNode, {ID: []byte("n1"), InstanceID: workers[1], Status: ray.NodeStatusIdle}}
	e, _, rc := membershipEnv(t, 40*time.Second, 10*time.Minute, nodes, ft)
	zombie := e.get(&corev1.Pod{}, workers[0]).(*corev1.Pod)
	runContainer(t, e, zombie, testNow.Add(-10*time.Minute), testNow.Add(-45*time.Second), false)
	// The first answer misses it: the grace (60 s) ends in 60 s.
	_, res, err := e.reconcile(rc)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(e.restarts()); n != 0 {
		t.Fatalf("%d restarts within the grace, want none", n)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > membership.DefaultGrace {
		t.Errorf("requeue after %v, want by the end of the grace (%s)", res.RequeueAfter, membership.DefaultGrace)
	}
	e.clock.SetTime(testNow.Add(membership.DefaultGrace))
	e.mustReconcile(rc)
	got := e.restarts()
	if len(got) != 1 || got[workers[0]] == nil || got[workers[0]].Annotations[constants.AnnotationRestartReason] != "NotInGCS" {
		t.Errorf("restarts %v, want only %s for NotInGCS", slices.Collect(maps.Keys(got)), workers[0])
	}
}

// Where no in-place restart can happen, Kruise replaces the pod: a restart refused at admission (Kruise's
// daemon turned off), or one Kruise completed without recreating the container (no daemon on the node).
func TestLostWorkerIsReplacedWhenItCannotRestartInPlace(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		e, _, rc := membershipEnv(t, 20*time.Second, 10*time.Minute, []ray.Node{headNode})
		e.r.Writer = refusingRestarts{e.r.Writer}
		writes := e.pastHeadReplacedGrace(rc)
		cs := e.get(&kruisev1alpha1.CloneSet{}, names.WorkerCloneSet("c", "g")).(*kruisev1alpha1.CloneSet)
		if !slices.Equal(cs.Spec.ScaleStrategy.PodsToDelete, workers) || ptr.Deref(cs.Spec.Replicas, 0) != 2 {
			t.Errorf("CloneSet podsToDelete %v replicas %d, want both workers named with replicas 2 (writes %v)", cs.Spec.ScaleStrategy.PodsToDelete, ptr.Deref(cs.Spec.Replicas, 0), writes)
		}
	})
	t.Run("restartPolicy Never", func(t *testing.T) {
		never := func(rc *rayv1.RayCluster) {
			rc.Spec.WorkerGroupSpecs[0].Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		}
		e, _, rc := membershipEnv(t, 20*time.Second, 10*time.Minute, []ray.Node{headNode}, never)
		e.pastHeadReplacedGrace(rc)
		if n := len(e.restarts()); n != 0 {
			t.Errorf("%d in-place restarts under restartPolicy Never, want none: a restarted container is an exit there", n)
		}
		cs := e.get(&kruisev1alpha1.CloneSet{}, names.WorkerCloneSet("c", "g")).(*kruisev1alpha1.CloneSet)
		if !slices.Equal(cs.Spec.ScaleStrategy.PodsToDelete, workers) {
			t.Errorf("CloneSet podsToDelete %v, want both workers", cs.Spec.ScaleStrategy.PodsToDelete)
		}
	})
	t.Run("never taken by a daemon", func(t *testing.T) {
		e, _, rc := membershipEnv(t, 20*time.Second, 10*time.Minute, []ray.Node{headNode})
		e.pastHeadReplacedGrace(rc)
		for _, crr := range e.restarts() {
			crr.Status = kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestCompleted, Message: "daemon has not responded for a long time"}
			if err := e.api.Update(context.Background(), crr); err != nil {
				t.Fatal(err)
			}
		}
		e.mustReconcile(rc)
		cs := e.get(&kruisev1alpha1.CloneSet{}, names.WorkerCloneSet("c", "g")).(*kruisev1alpha1.CloneSet)
		if !slices.Equal(cs.Spec.ScaleStrategy.PodsToDelete, workers) {
			t.Errorf("CloneSet podsToDelete %v, want both workers", cs.Spec.ScaleStrategy.PodsToDelete)
		}
		// Named once: another reconcile adds nothing.
		e.mustReconcile(rc)
		cs = e.get(&kruisev1alpha1.CloneSet{}, names.WorkerCloneSet("c", "g")).(*kruisev1alpha1.CloneSet)
		if len(cs.Spec.ScaleStrategy.PodsToDelete) != 2 {
			t.Errorf("CloneSet podsToDelete %v after another reconcile, want the two names once", cs.Spec.ScaleStrategy.PodsToDelete)
		}
	})
}

// kruiseWebhook is a writer whose API server stamps each ContainerRecreateRequest created as Kruise's mutating
// webhook does: each container's statusContext, its ID and restart count, from the pod as from reads it
// (kruise-manager's cache, which may lag or lead the API server).
type kruiseWebhook struct {
	shared.Writer
	from client.Reader
}

func (w kruiseWebhook) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if crr, ok := obj.(*kruisev1alpha1.ContainerRecreateRequest); ok {
		p := &corev1.Pod{}
		if err := w.from.Get(ctx, client.ObjectKey{Namespace: crr.Namespace, Name: crr.Spec.PodName}, p); err != nil {
			return err
		}
		for i := range crr.Spec.Containers {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name == crr.Spec.Containers[i].Name {
					crr.Spec.Containers[i].StatusContext = &kruisev1alpha1.ContainerRecreateRequestContainerContext{ContainerID: cs.ContainerID, RestartCount: cs.RestartCount}
				}
			}
		}
	}
	return w.Writer.Create(ctx, obj, opts...)
}

// failingRay is a GCS that never answers.
type failingRay struct{}

func (failingRay) Dial(string, ray.Credentials) (ray.Client, error) {
	return failedClient{errors.New("unreachable")}, nil
}

// refusingRestarts is a writer whose API server refuses ContainerRecreateRequests, as Kruise's webhook does
// with its daemon turned off.
type refusingRestarts struct{ shared.Writer }

func (w refusingRestarts) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*kruisev1alpha1.ContainerRecreateRequest); ok {
		return apierrors.NewForbidden(schema.GroupResource{Group: "apps.kruise.io", Resource: "containerrecreaterequests"}, obj.GetName(),
			errors.New(`admission webhook "mcontainerrecreaterequest.kb.io" denied the request: feature-gate KruiseDaemon is not enabled`))
	}
	return w.Writer.Create(ctx, obj, opts...)
}

// A cache that has not seen the restarted container yet (it still shows the run the restart ended) finds the
// restart done: nothing is asked again and no pod is replaced.
func TestRestartDoneBehindALaggingCache(t *testing.T) {
	e, _, rc := membershipEnv(t, 20*time.Second, 10*time.Minute, []ray.Node{headNode})
	e.pastHeadReplacedGrace(rc)
	e.r.Cache = snapshot(t, e)
	for _, w := range workers {
		restartedRun(t, e, w, testNow.Add(40*time.Second))
	}
	for _, crr := range e.restarts() {
		crr.Spec.Containers[0].StatusContext = &kruisev1alpha1.ContainerRecreateRequestContainerContext{ContainerID: crr.Annotations[constants.AnnotationRestartedRun]}
		crr.Status = kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestCompleted,
			ContainerRecreateStates: []kruisev1alpha1.ContainerRecreateRequestContainerRecreateState{{Name: "ray-worker", Phase: kruisev1alpha1.ContainerRecreateRequestSucceeded}}}
		if err := e.api.Update(context.Background(), crr); err != nil {
			t.Fatal(err)
		}
	}
	var writes []string
	for _, d := range []time.Duration{45 * time.Second, 2 * time.Minute, 5 * time.Minute} {
		e.clock.SetTime(testNow.Add(d))
		writes, _, _ = e.reconcile(rc) // the stale cache may fail the status write
	}
	if n := len(e.restarts()); n != 2 {
		t.Errorf("%d restarts, want the 2 done ones", n)
	}
	cs := e.get(&kruisev1alpha1.CloneSet{}, names.WorkerCloneSet("c", "g")).(*kruisev1alpha1.CloneSet)
	if len(cs.Spec.ScaleStrategy.PodsToDelete) != 0 {
		t.Errorf("podsToDelete %v after a restart that succeeded, want none (writes %v)", cs.Spec.ScaleStrategy.PodsToDelete, writes)
	}
	if c := meta.FindStatusCondition(e.get(&rayv1.RayCluster{}, "c").(*rayv1.RayCluster).Status.Conditions, constants.ConditionWorkersRestarting); c != nil {
		t.Errorf("condition %s once the restarts are done: %+v", constants.ConditionWorkersRestarting, c)
	}
}
