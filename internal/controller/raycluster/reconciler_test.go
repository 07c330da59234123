package raycluster

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/internal/writetest"
	"github.com/kray-project/kray/pkg/constants"
)

func TestReconcileCreatesAClusterOnceThenWritesNothing(t *testing.T) {
	rc := cluster("c").group("small", 2).group("big", 1).obj()
	e := newEnv(t, rc)

	want := []string{
		// The dry runs go out together, in no particular order.
		"create CloneSet/c-big-worker (dry run)", "create CloneSet/c-small-worker (dry run)", "create StatefulSet/c-head (dry run)",
		"create StatefulSet/c-head",
		// Then the CloneSets and the Service together.
		"create CloneSet/c-big-worker", "create CloneSet/c-small-worker", "create Service/c-head-svc",
	}
	// The status waits for the next reconcile: nothing the first one read exists yet.
	first := e.mustReconcile(rc)
	if len(first) == len(want) {
		slices.Sort(first[:3])
		slices.Sort(first[4:])
	}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Fatalf("first reconcile's writes (-want +got):\n%s", diff)
	}
	if got := e.get(&rayv1.RayCluster{}, "c").(*rayv1.RayCluster); got.Status.ObservedGeneration != 0 {
		t.Fatalf("the first reconcile wrote the status %+v", got.Status)
	}
	wantEvents := []string{EventCreatedHeadStatefulSet, EventCreatedWorkerCloneSet, EventCreatedWorkerCloneSet, shared.EventCreatedService}
	if diff := cmp.Diff(wantEvents, reasons(e.takeEvents())); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	e.playKruise(rc)
	if diff := cmp.Diff([]string{"status RayCluster/c"}, e.mustReconcile(rc)); diff != "" {
		t.Fatalf("reconcile after the pods came up (-want +got):\n%s", diff)
	}
	got := e.get(&rayv1.RayCluster{}, "c").(*rayv1.RayCluster)
	if got.Status.State != rayv1.Ready || got.Status.ReadyWorkerReplicas != 3 {
		t.Errorf("state %q with %d ready workers, want ready with 3", got.Status.State, got.Status.ReadyWorkerReplicas)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, constants.ConditionPodsUpToDate) {
		t.Errorf("conditions %+v: the pods of a new cluster are not up to date", got.Status.Conditions)
	}
	if writes := e.mustReconcile(rc); len(writes) != 0 {
		t.Errorf("a reconcile of a converged cluster wrote %v", writes)
	}
	if ev := e.takeEvents(); len(ev) != 0 {
		t.Errorf("a reconcile of a converged cluster emitted %v", ev)
	}
}

// Every feature that adds objects or pod writes converges, and then a reconcile writes nothing at all.
func TestReconcileOfAConvergedClusterWritesNothing(t *testing.T) {
	cases := map[string]*rayv1.RayCluster{
		"minimal":    cluster("c").group("g", 2).obj(),
		"no workers": cluster("c").obj(),
		"autoscaling": cluster("c").group("g", 2).with(func(rc *rayv1.RayCluster) {
			rc.Spec.EnableInTreeAutoscaling = ptr.To(true)
		}).obj(),
		"token auth": cluster("c").group("g", 1).with(func(rc *rayv1.RayCluster) {
			rc.Spec.RayVersion = "2.52.0"
			rc.Spec.AuthOptions = &rayv1.AuthOptions{Mode: rayv1.AuthModeToken}
		}).obj(),
		"multi-host": cluster("c").group("g", 2).with(func(rc *rayv1.RayCluster) {
			rc.Spec.WorkerGroupSpecs[0].NumOfHosts = 2
		}).obj(),
		"worker drain": cluster("c").group("g", 2).with(func(rc *rayv1.RayCluster) {
			rc.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{}
		}).obj(),
		"rolling update": cluster("c").group("a", 1).group("b", 1).with(func(rc *rayv1.RayCluster) {
			rc.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: ptr.To(rayv1.RayClusterRollingUpdate)}
		}).obj(),
		"suspended": cluster("c").group("g", 2).with(func(rc *rayv1.RayCluster) {
			rc.Spec.Suspend = ptr.To(true)
		}).obj(),
		"ingress and serve": cluster("c").group("g", 1).with(func(rc *rayv1.RayCluster) {
			rc.Spec.HeadGroupSpec.EnableIngress = ptr.To(true)
			rc.Annotations = map[string]string{constants.AnnotationEnableServeService: "true"}
		}).obj(),
	}
	for name, rc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, rc)
			e.r.ReplicaIndexing = true
			e.converge(rc)
			if writes := e.mustReconcile(rc); len(writes) != 0 {
				t.Errorf("a reconcile of a converged cluster wrote %v", writes)
			}
		})
	}
}

func TestScalingGoesOnWhenAnIndependentPhaseFails(t *testing.T) {
	rc := cluster("c").group("g", 1).with(func(rc *rayv1.RayCluster) { rc.Spec.HeadGroupSpec.EnableIngress = ptr.To(true) }).obj()
	e := newEnv(t, rc)
	refused := apierrors.NewForbidden(schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, "c-head-ingress", errors.New("quota"))
	e.writer.Fail(writetest.Create, "Ingress", "", refused)
	e.updateSpec(rc, func(rc *rayv1.RayCluster) { rc.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](3) })

	writes, _, err := e.reconcile(rc)
	if err == nil || !strings.Contains(err.Error(), "phase ingress") {
		t.Fatalf("Reconcile error %v, want the ingress phase's", err)
	}
	if !containsAll(writes, "create CloneSet/c-g-worker", "create StatefulSet/c-head") {
		t.Errorf("writes %v: the workloads were not created while the Ingress was refused", writes)
	}
	got := e.get(&rayv1.RayCluster{}, "c").(*rayv1.RayCluster)
	c := meta.FindStatusCondition(got.Status.Conditions, constants.ConditionWorkloadsSynced)
	if c == nil || c.Status != "False" || !strings.Contains(c.Message, "phase ingress") {
		t.Errorf("condition %s = %+v, want False naming the ingress phase", constants.ConditionWorkloadsSynced, c)
	}
	if !containsAll(reasons(e.takeEvents()), EventFailedToCreateIngress, EventCreatedWorkerCloneSet) {
		t.Errorf("events lack the Ingress failure or the CloneSet creation")
	}
}

// containsAll reports whether got holds every item of want.
func containsAll(got []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			return false
		}
	}
	return true
}

// A change of the worker counts alone waits progressWriteInterval from the reconcile that first saw it; the
// reconciles that hold it back ask to come back when the wait ends.
func TestWorkerCountChangesAreHeldBack(t *testing.T) {
	rc := cluster("c").group("g", 2).obj()
	e := newEnv(t, rc)
	e.converge(rc)
	worker := e.pods(rc)[0]
	p := e.get(&corev1.Pod{}, worker).(*corev1.Pod)
	p.Status.Conditions[0].Status = corev1.ConditionFalse // the worker is no longer Ready
	if err := e.api.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}

	seen := testNow.Add(time.Minute)
	for _, after := range []time.Duration{0, time.Second} {
		e.clock.SetTime(seen.Add(after))
		writes, res, err := e.reconcile(rc)
		if err != nil || len(writes) != 0 {
			t.Fatalf("%v after the change was first seen: writes %v, error %v; want none", after, writes, err)
		}
		if want := progressWriteInterval - after; res.RequeueAfter != want {
			t.Errorf("%v after the change was first seen: requeue after %v, want %v", after, res.RequeueAfter, want)
		}
	}

	e.clock.SetTime(seen.Add(progressWriteInterval))
	if diff := cmp.Diff([]string{"status RayCluster/c"}, e.mustReconcile(rc)); diff != "" {
		t.Fatalf("once the wait ended (-want +got):\n%s", diff)
	}
	if got := e.get(&rayv1.RayCluster{}, "c").(*rayv1.RayCluster); got.Status.ReadyWorkerReplicas != 1 || got.Status.State != rayv1.Ready {
		t.Errorf("state %q with %d ready workers, want ready with 1", got.Status.State, got.Status.ReadyWorkerReplicas)
	}
	if _, held := e.r.progress.since.Load(objKey(rc)); held {
		t.Error("the written change is still held")
	}
}

// Until the cluster is first provisioned, a change of the counts alone waits firstProvisionWriteInterval.
func TestCountsOfANewClusterWaitLonger(t *testing.T) {
	rc := cluster("c").group("g", 2).obj()
	e := newEnv(t, rc)
	e.mustReconcile(rc)
	e.playKruise(rc)
	setReady := func(pod string, ready corev1.ConditionStatus) {
		p := e.get(&corev1.Pod{}, pod).(*corev1.Pod)
		p.Status.Conditions[0].Status = ready
		if err := e.api.Status().Update(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	var workers []string
	for _, p := range e.pods(rc) {
		if strings.Contains(p, "worker") {
			workers = append(workers, p)
		}
	}
	setReady(workers[0], corev1.ConditionFalse)
	if diff := cmp.Diff([]string{"status RayCluster/c"}, e.mustReconcile(rc)); diff != "" {
		t.Fatalf("first status (-want +got):\n%s", diff)
	}
	setReady(workers[1], corev1.ConditionFalse)
	writes, res, err := e.reconcile(rc)
	if err != nil || len(writes) != 0 {
		t.Fatalf("a count change before the cluster was provisioned: writes %v, error %v; want none", writes, err)
	}
	if res.RequeueAfter != firstProvisionWriteInterval {
		t.Errorf("requeue after %v, want %v", res.RequeueAfter, firstProvisionWriteInterval)
	}
}

// A change that is more than the worker counts is written at once, with the counts held back before it.
func TestStatusTransitionsAreNotHeldBack(t *testing.T) {
	rc := cluster("c").group("g", 2).obj()
	e := newEnv(t, rc)
	e.converge(rc)
	p := e.get(&corev1.Pod{}, e.pods(rc)[0]).(*corev1.Pod)
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	if err := e.api.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if writes := e.mustReconcile(rc); len(writes) != 0 {
		t.Fatalf("writes %v: the worker count change was not held back", writes)
	}

	e.updateSpec(rc, func(rc *rayv1.RayCluster) { rc.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](3) })
	writes := e.mustReconcile(rc)
	if !slices.Contains(writes, "status RayCluster/c") {
		t.Fatalf("writes %v: the new desired size was not written at once", writes)
	}
	got := e.get(&rayv1.RayCluster{}, "c").(*rayv1.RayCluster)
	if got.Status.DesiredWorkerReplicas != 3 || got.Status.ReadyWorkerReplicas != 1 {
		t.Errorf("desired %d and ready %d workers, want 3 and 1", got.Status.DesiredWorkerReplicas, got.Status.ReadyWorkerReplicas)
	}
	if _, held := e.r.progress.since.Load(objKey(rc)); held {
		t.Error("the written counts are still held")
	}
}

// A reconcile reads its own cluster's children by the cluster index, never a neighbour's in the namespace.
func TestChildrenAreTheClustersOwn(t *testing.T) {
	c, c2 := cluster("c").group("g", 2).obj(), cluster("c2").group("g", 3).obj()
	e := newEnv(t, c, c2)
	e.converge(c)
	e.converge(c2)
	kids, err := e.r.readChildren(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range kids.pods {
		got = append(got, p.Name)
	}
	for _, cs := range kids.cloneSets {
		got = append(got, cs.Name)
	}
	want := append(e.pods(c), "c-g-worker")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("children of c (-want +got):\n%s", diff)
	}
}
