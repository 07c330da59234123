package raycluster

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/ray"
)

// These tests hold the rules that keep worker healing from restarting a worker that is alive, rejoining, or
// already restarting: each drives the reconciler through a head loss as a real cluster shows it (a lagging
// cache, a GCS that is not this cluster's, skewed clocks, a slow restart) and counts the restarts asked.

// at sets the reconciler's clock to testNow plus d and reconciles rc; errors are logged, not fatal, because a
// stale cache may fail the status write, and only the restarts count here.
func (e *env) reconcileAt(rc *rayv1.RayCluster, d time.Duration) {
	e.t.Helper()
	e.clock.SetTime(testNow.Add(d))
	if _, _, err := e.reconcile(rc); err != nil {
		e.t.Logf("reconcile at +%s: %v", d, err)
	}
}

// replaced is the podsToDelete of the group's CloneSet: the pods kray asked Kruise to replace.
func (e *env) replaced() []string {
	e.t.Helper()
	return e.get(&kruisev1alpha1.CloneSet{}, names.WorkerCloneSet("c", "g")).(*kruisev1alpha1.CloneSet).Spec.ScaleStrategy.PodsToDelete
}

// restartedRun runs a new run of the pod's Ray container, as the kubelet does after the raylet exited: started
// at started, not ready.
func restartedRun(t *testing.T, e *env, name string, started time.Time) {
	t.Helper()
	p := e.get(&corev1.Pod{}, name).(*corev1.Pod)
	runContainer(t, e, p, started, started, false)
	p = e.get(&corev1.Pod{}, name).(*corev1.Pod)
	p.Status.ContainerStatuses[0].RestartCount = 1
	if err := e.api.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// workerNode is the GCS's live node of worker pod i, registered by instance ID.
func workerNode(i int) ray.Node {
	return ray.Node{ID: []byte{byte('n'), byte('0' + i)}, InstanceID: workers[i], IP: workerIP(i), Status: ray.NodeStatusIdle}
}

// Finding 1: the raylets of a replaced head's workers exit on their own at their liveness self-check and the
// kubelet starts new runs; an informer cache that still shows the old runs must not get those new runs
// restarted, however long it lags.
func TestLaggingCacheNeverRestartsTheRunRayRestarted(t *testing.T) {
	e, _, rc := membershipEnv(t, 20*time.Second, 10*time.Minute, []ray.Node{headNode})
	e.r.Cache = snapshot(t, e) // the cache stops here, with the old runs
	for _, w := range workers {
		restartedRun(t, e, w, testNow.Add(2*time.Second))
	}
	for _, d := range []time.Duration{3 * time.Second, 40 * time.Second, 70 * time.Second, 3 * time.Minute} {
		e.reconcileAt(rc, d)
	}
	if got := e.restarts(); len(got) != 0 {
		t.Errorf("%d restarts asked for runs Ray already restarted (the cache showed the old ones), want none", len(got))
	}
	if got := e.replaced(); len(got) != 0 {
		t.Errorf("podsToDelete %v, want none", got)
	}
}

// Finding 2: a GCS answer decides only when it lists this cluster's head, alive, by the head pod's name at
// its IP: an empty answer, another cluster's GCS (one --ray-gcs-address for all), or a GCS that lists a head
// of the same name elsewhere, decides nothing, however long the workers stay out of it; it is asked again soon,
// as a GCS that did not answer is.
func TestAGCSThatIsNotThisClustersDecidesNothing(t *testing.T) {
	cases := []struct {
		name    string
		nodes   []ray.Node
		restart bool
	}{
		{name: "empty answer", nodes: []ray.Node{}},
		{name: "another cluster's GCS", nodes: []ray.Node{{ID: []byte("o"), InstanceID: "other-head-0", IP: "10.9.0.1", Status: ray.NodeStatusIdle}}},
		{name: "a head of the same name at another IP", nodes: []ray.Node{{ID: []byte("o"), InstanceID: "c-head-0", IP: "10.9.0.1", Status: ray.NodeStatusIdle}}},
		{name: "this head, dead", nodes: []ray.Node{{ID: []byte("h"), InstanceID: "c-head-0", IP: headIP, Status: ray.NodeStatusDead}}},
		{name: "this cluster's GCS (positive control)", nodes: []ray.Node{headNode}, restart: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, _, rc := membershipEnv(t, 20*time.Second, 10*time.Minute, tc.nodes)
			// Nothing else may come to reconcile the cluster: the GCS is asked again soon.
			if _, res, _ := e.reconcile(rc); !tc.restart && (res.RequeueAfter <= 0 || res.RequeueAfter > 5*time.Second) {
				t.Errorf("requeue after %v once an answer was not this cluster's GCS, want within 5 s", res.RequeueAfter)
			}
			for _, d := range []time.Duration{0, 40 * time.Second, 70 * time.Second, 3 * time.Minute} {
				e.reconcileAt(rc, d)
			}
			if got := len(e.restarts()); (got > 0) != tc.restart {
				t.Errorf("%d restarts, want restarts: %v", got, tc.restart)
			}
		})
	}
}

// Findings 3 and 4: a worker whose Ray container started before the head's is not always a node of the gone
// GCS: it restarted while the head was away (longer than Ray's reconnect timeout) and waits for the new GCS,
// or its node's clock is behind the head node's. It is given a grace from the first answer of the new GCS,
// and one that registers within it is never restarted. Only one that stays out is.
func TestWorkersThatStartedBeforeTheHeadGetAGrace(t *testing.T) {
	cases := []struct {
		name string
		// started is when the workers' current runs started, as their nodes' clocks say, relative to testNow.
		started time.Duration
	}{
		{name: "restarted while the head was away", started: -50 * time.Second},
		{name: "started after the head, on a node whose clock is 30 s behind", started: -25 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, gcs, rc := membershipEnv(t, 20*time.Second, 10*time.Minute, []ray.Node{headNode})
			for _, w := range workers {
				restartedRun(t, e, w, testNow.Add(tc.started))
			}
			e.reconcileAt(rc, 0)
			if got := e.restarts(); len(got) != 0 {
				t.Fatalf("%d restarts at the new GCS's first answer, want none within the grace", len(got))
			}
			// Worker 0 registers; worker 1 never does.
			gcs.nodes = []ray.Node{headNode, workerNode(0)}
			for _, d := range []time.Duration{5 * time.Second, 40 * time.Second, 70 * time.Second, 3 * time.Minute} {
				e.reconcileAt(rc, d)
			}
			got := e.restarts()
			if got[workers[0]] != nil {
				t.Errorf("%s, registered within the grace, was restarted", workers[0])
			}
			if got[workers[1]] == nil {
				t.Errorf("%s, out of the GCS for minutes, was not restarted (restarts %v)", workers[1], keys(got))
			}
		})
	}
}

// Finding 4: the API server's clock behind the operator's makes a fresh restart look past its deadline; kray
// counts a restart's time on its own clock, and replaces no pod whose restart has just been asked.
func TestARestartIsTimedOnTheOperatorsClock(t *testing.T) {
	e, _, rc := membershipEnv(t, 20*time.Second, 10*time.Minute, []ray.Node{headNode})
	e.reconcileAt(rc, 0)
	e.reconcileAt(rc, 2*time.Minute)
	crrs := e.restarts()
	if len(crrs) != 2 {
		t.Fatalf("%d restarts of the replaced head's workers, want 2", len(crrs))
	}
	for _, crr := range crrs {
		// Created a moment ago, as the API server's clock, 80 s behind the operator's, stamps it.
		crr.CreationTimestamp = metav1.NewTime(testNow.Add(2*time.Minute - 80*time.Second))
		if err := e.api.Update(context.Background(), crr); err != nil {
			t.Fatal(err)
		}
	}
	e.reconcileAt(rc, 2*time.Minute+time.Second)
	if got := e.replaced(); len(got) != 0 {
		t.Errorf("podsToDelete %v a second after the restarts were asked, want none", got)
	}
}

// Finding 5: Kruise completes a restart at its deadline and marks a container not yet ready Failed, while the
// restart is under way (a long stop) or done (a new run not ready yet). kray waits for the restart it asked
// for, and replaces the pod only if the container it judged still runs well past the deadline.
func TestASlowRestartIsNotReplaced(t *testing.T) {
	failedAtDeadline := func(t *testing.T, e *env) {
		t.Helper()
		for _, crr := range e.restarts() {
			crr.Spec.Containers[0].StatusContext = &kruisev1alpha1.ContainerRecreateRequestContainerContext{ContainerID: crr.Annotations[constants.AnnotationRestartedRun]}
			crr.Status = kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestCompleted, Message: "recreating has exceeded the activeDeadlineSeconds",
				ContainerRecreateStates: []kruisev1alpha1.ContainerRecreateRequestContainerRecreateState{{Name: "ray-worker", Phase: kruisev1alpha1.ContainerRecreateRequestFailed, Message: "recreating has exceeded the activeDeadlineSeconds"}}}
			if err := e.api.Update(context.Background(), crr); err != nil {
				t.Fatal(err)
			}
		}
	}
	start := func(t *testing.T) (*env, *rayv1.RayCluster, time.Duration) {
		e, _, rc := membershipEnv(t, 20*time.Second, 10*time.Minute, []ray.Node{headNode})
		e.reconcileAt(rc, 0)
		e.reconcileAt(rc, 2*time.Minute)
		if n := len(e.restarts()); n != 2 {
			t.Fatalf("%d restarts, want 2", n)
		}
		return e, rc, 2 * time.Minute
	}
	t.Run("the new run is not ready yet", func(t *testing.T) {
		e, rc, asked := start(t)
		e.r.Cache = snapshot(t, e) // the cache still shows the judged runs
		for _, w := range workers {
			restartedRun(t, e, w, testNow.Add(asked+50*time.Second))
		}
		failedAtDeadline(t, e)
		for _, d := range []time.Duration{61 * time.Second, 75 * time.Second, 3 * time.Minute} {
			e.reconcileAt(rc, asked+d)
		}
		if got := e.replaced(); len(got) != 0 {
			t.Errorf("podsToDelete %v for pods whose restart happened, want none", got)
		}
	})
	t.Run("the old run still stopping", func(t *testing.T) {
		e, rc, asked := start(t)
		failedAtDeadline(t, e)
		e.reconcileAt(rc, asked+71*time.Second)
		if got := e.replaced(); len(got) != 0 {
			t.Errorf("podsToDelete %v while the restart Kruise took may still be stopping the container, want none", got)
		}
		// Far past the deadline and the pod's termination grace, the judged run still runs: the restart failed.
		e.reconcileAt(rc, asked+3*time.Minute)
		if got := e.replaced(); !slices.Equal(got, workers) {
			t.Errorf("podsToDelete %v once the restart has clearly failed, want both workers", got)
		}
	})
}

// Finding 5: in a multi-host group a replaced pod takes its whole replica with it, every sibling host alive
// in Ray: kray never turns one host's failed in-place restart into a replacement; it says why in a Warning.
func TestAMultiHostWorkerIsNeverReplacedForHealing(t *testing.T) {
	e, _, rc := membershipEnv(t, 20*time.Second, 10*time.Minute, []ray.Node{headNode}, func(rc *rayv1.RayCluster) {
		rc.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](1)
		rc.Spec.WorkerGroupSpecs[0].NumOfHosts = 2
	})
	e.r.Writer = refusingRestarts{e.r.Writer}
	for _, d := range []time.Duration{0, 40 * time.Second, 70 * time.Second, 3 * time.Minute} {
		e.reconcileAt(rc, d)
	}
	if got := e.replaced(); len(got) != 0 {
		t.Errorf("podsToDelete %v in a multi-host group, want none", got)
	}
	if events := strings.Join(e.takeEvents(), "\n"); !strings.Contains(events, EventFailedToRestartWorker) {
		t.Errorf("no %s Warning for a worker that could not be restarted in place; events:\n%s", EventFailedToRestartWorker, events)
	}
}

// Finding 6: a raylet registered without an instance ID at one of the pod's IPs other than status.podIP (the
// second family of a dual-stack pod, or a Multus network's) is the pod's node.
func TestANodeAtAnyOfThePodsIPsIsItsNode(t *testing.T) {
	cases := []struct {
		name string
		// setup gives worker 0 its IPs and returns the IP its raylet registered at.
		setup func(p *corev1.Pod) string
	}{
		{name: "dual-stack", setup: func(p *corev1.Pod) string {
			p.Status.PodIPs = []corev1.PodIP{{IP: p.Status.PodIP}, {IP: "fd00::1:0"}}
			return "fd00::1:0"
		}},
		{name: "Multus", setup: func(p *corev1.Pod) string {
			p.Annotations = map[string]string{constants.AnnotationMultusNetworkStatus: `[{"name":"default","ips":["` + p.Status.PodIP + `"],"default":true},{"name":"ns/fast","interface":"net1","ips":["192.168.50.7"]}]`}
			return "192.168.50.7"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, gcs, rc := membershipEnv(t, 20*time.Second, 10*time.Minute, nil)
			p := e.get(&corev1.Pod{}, workers[0]).(*corev1.Pod)
			ip := tc.setup(p)
			if err := e.api.Update(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			p.Status = e.get(&corev1.Pod{}, workers[0]).(*corev1.Pod).Status
			tc.setup(p)
			if err := e.api.Status().Update(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			gcs.nodes = []ray.Node{headNode, {ID: []byte("n0"), IP: ip, Status: ray.NodeStatusIdle}, workerNode(1)}
			for _, d := range []time.Duration{0, 40 * time.Second, 70 * time.Second, 3 * time.Minute} {
				e.reconcileAt(rc, d)
			}
			if got := e.restarts(); len(got) != 0 {
				t.Errorf("restarts %v of workers the GCS lists, want none", keys(got))
			}
		})
	}
}

// Finding 6: a worker that never joins (a NetworkPolicy or a TLS mistake on its side) is restarted with a
// back-off, not every grace period forever, and a Warning and a condition say it does not join.
func TestAWorkerThatNeverJoinsIsRestartedWithABackOff(t *testing.T) {
	e, gcs, rc := membershipEnv(t, 20*time.Second, 10*time.Minute, []ray.Node{headNode})
	gcs.nodes = []ray.Node{headNode, workerNode(1)}
	e.reconcileAt(rc, 0)
	e.reconcileAt(rc, 2*time.Minute)
	first := e.restarts()[workers[0]]
	if first == nil || len(e.restarts()) != 1 {
		t.Fatalf("restarts %v, want only %s", keys(e.restarts()), workers[0])
	}
	first.Status = kruisev1alpha1.ContainerRecreateRequestStatus{Phase: kruisev1alpha1.ContainerRecreateRequestCompleted,
		ContainerRecreateStates: []kruisev1alpha1.ContainerRecreateRequestContainerRecreateState{{Name: "ray-worker", Phase: kruisev1alpha1.ContainerRecreateRequestSucceeded}}}
	if err := e.api.Update(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	// The kubelet restarts the container (a reconcile sees it not running), and the new run never joins either.
	restart := func(d time.Duration) {
		stoppedRun(t, e, workers[0])
		e.reconcileAt(rc, d+2*time.Second)
		restartedRun(t, e, workers[0], testNow.Add(d+5*time.Second))
	}
	restart(2 * time.Minute)
	e.takeEvents()
	reads := &podReads{Reader: e.r.APIReader}
	e.r.APIReader = reads
	var asked []time.Duration
	waiting := 0 // live reads of the pod in reconciles that asked no restart
	for d := 2*time.Minute + 10*time.Second; d <= 12*time.Minute; d += 10 * time.Second {
		before, read := len(e.crrsOf(workers[0])), reads.of(workers[0])
		e.reconcileAt(rc, d)
		if len(e.crrsOf(workers[0])) > before {
			asked = append(asked, d)
			restart(d)
		} else {
			waiting += reads.of(workers[0]) - read
		}
	}
	if waiting != 0 {
		t.Errorf("%d live reads of the pod while its next restart waits out its back-off, want none", waiting)
	}
	// Without a back-off a restart would come every grace period (60 s): ten in these ten minutes.
	if len(asked) > 4 {
		t.Errorf("restarts of a worker that never joins at %v, want a back-off (at most 4 in 10 minutes)", asked)
	}
	if len(asked) == 0 {
		t.Errorf("no more restarts of a worker that never joins in 10 minutes, want a back-off, not a stop")
	}
	if events := strings.Join(e.takeEvents(), "\n"); !strings.Contains(events, EventWorkerNotJoining) {
		t.Errorf("no %s Warning; events:\n%s", EventWorkerNotJoining, events)
	}
	cond := meta.FindStatusCondition(e.get(&rayv1.RayCluster{}, "c").(*rayv1.RayCluster).Status.Conditions, constants.ConditionWorkersNotJoining)
	if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, workers[0]) {
		t.Errorf("condition %s = %+v, want True naming %s", constants.ConditionWorkersNotJoining, cond, workers[0])
	}
	// It joins at last: the condition goes.
	gcs.nodes = []ray.Node{headNode, workerNode(0), workerNode(1)}
	e.reconcileAt(rc, 13*time.Minute)
	if cond := meta.FindStatusCondition(e.get(&rayv1.RayCluster{}, "c").(*rayv1.RayCluster).Status.Conditions, constants.ConditionWorkersNotJoining); cond != nil {
		t.Errorf("condition %s = %+v once the worker joined, want none", constants.ConditionWorkersNotJoining, cond)
	}
}

// stoppedRun shows the pod's Ray container not running, as while the kubelet restarts it.
func stoppedRun(t *testing.T, e *env, name string) {
	t.Helper()
	p := e.get(&corev1.Pod{}, name).(*corev1.Pod)
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	if err := e.api.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// podReads is a reader that counts its reads of each pod, by name.
type podReads struct {
	client.Reader
	mu   sync.Mutex
	pods map[string]int
}

func (r *podReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Pod); ok {
		r.mu.Lock()
		if r.pods == nil {
			r.pods = map[string]int{}
		}
		r.pods[key.Name]++
		r.mu.Unlock()
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// of is how many times the pod named name was read.
func (r *podReads) of(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pods[name]
}

// crrsOf are the restarts asked for the pod named name, whatever their run.
func (e *env) crrsOf(name string) []string {
	list := &kruisev1alpha1.ContainerRecreateRequestList{}
	if err := e.api.List(context.Background(), list); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, c := range list.Items {
		if c.Spec.PodName == name {
			out = append(out, c.Name)
		}
	}
	return out
}

// keys are a map's keys, sorted.
func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// A GCS that does not answer while a worker's membership is in doubt (the head was just replaced, or kray
// paused its calls) is asked again shortly: no event may come to reconcile the cluster (a zombie's readiness
// never changes), and its loss would otherwise wait for the resync.
func TestAGCSThatDidNotAnswerIsAskedAgain(t *testing.T) {
	e, _, rc := membershipEnv(t, 20*time.Second, 10*time.Minute, []ray.Node{headNode})
	answering := e.r.Ray
	e.r.Ray = failingRay{}
	_, res, err := e.reconcile(rc)
	if err != nil {
		t.Logf("reconcile: %v", err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > gcsPauseMax {
		t.Fatalf("requeue after %v with a GCS that did not answer and workers in doubt, want within %s", res.RequeueAfter, gcsPauseMax)
	}
	e.r.Ray = answering
	e.reconcileAt(rc, time.Minute)
	e.reconcileAt(rc, 3*time.Minute)
	if n := len(e.restarts()); n != 2 {
		t.Errorf("%d restarts once the GCS answers, want 2", n)
	}
}

// A GCS that never answers is asked again less often at each miss, a minute apart at most, so that clusters
// whose GCS the operator cannot reach do not take the reconcile workers; one that no call of kray's can reach
// (Kubernetes token auth) is not asked again until something else changes.
func TestAGCSThatNeverAnswersIsAskedLessOften(t *testing.T) {
	ft := func(rc *rayv1.RayCluster) {
		rc.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379"}
	}
	t.Run("unreachable", func(t *testing.T) {
		e, _, rc := membershipEnv(t, 20*time.Second, 10*time.Minute, []ray.Node{headNode}, ft)
		e.r.Ray = failingRay{}
		var got []time.Duration
		var at time.Duration
		for range 7 {
			e.clock.SetTime(testNow.Add(at))
			_, res, _ := e.reconcile(rc)
			got = append(got, res.RequeueAfter)
			at += res.RequeueAfter
		}
		want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute, time.Minute}
		if !slices.Equal(got, want) {
			t.Errorf("requeues %v, want %v", got, want)
		}
	})
	t.Run("Kubernetes token auth", func(t *testing.T) {
		e, _, rc := membershipEnv(t, 20*time.Second, 10*time.Minute, []ray.Node{headNode}, ft)
		live := e.get(&rayv1.RayCluster{}, "c").(*rayv1.RayCluster)
		live.Spec.RayVersion = "2.55.0" // Ray checks Kubernetes tokens from 2.55
		live.Spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken, EnableK8sTokenAuth: ptr.To(true)}
		if err := e.api.Update(context.Background(), live); err != nil {
			t.Fatal(err)
		}
		_, res, err := e.reconcile(rc)
		if events := strings.Join(e.takeEvents(), "\n"); err != nil || strings.Contains(events, EventInvalidSpec) {
			t.Fatalf("reconcile: %v, events:\n%s", err, events)
		}
		if res.RequeueAfter != 0 && res.RequeueAfter <= time.Minute {
			t.Errorf("requeue after %v for a GCS no call can reach, want none within a minute", res.RequeueAfter)
		}
	})
}
