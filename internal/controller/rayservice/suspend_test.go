package rayservice

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// conditionIs fails the test unless st's condition t has status and reason.
func conditionIs(t *testing.T, st rayv1.RayServiceStatuses, ct rayv1.RayServiceConditionType, status metav1.ConditionStatus, reason rayv1.RayServiceConditionReason) {
	t.Helper()
	if c := condition(st, ct); c == nil || c.Status != status || c.Reason != string(reason) {
		t.Errorf("%s = %+v, want %s %s", ct, c, status, reason)
	}
}

// KubeRay v1.7's suspend: the commit stores Suspending and forgets the clusters, then the clusters and both
// Services are deleted whatever spec.suspend becomes, Suspended once all are gone; resuming starts a new
// cluster under a new name, with the initializing timeout counted afresh.
func TestSuspendAndResume(t *testing.T) {
	w, name := serving(t)
	w.svc = w.svc.DeepCopy()
	w.svc.Spec.Suspend, w.svc.Generation = true, 2

	d := w.step(t)
	if len(d.Actions) != 0 {
		t.Errorf("commit step: %v, want nothing deleted before Suspending is stored", kinds(d))
	}
	conditionIs(t, d.Status, rayv1.RayServiceSuspending, metav1.ConditionTrue, rayv1.SuspendRequested)
	conditionIs(t, d.Status, rayv1.RayServiceReady, metav1.ConditionFalse, rayv1.SuspendInProgress)
	conditionIs(t, d.Status, rayv1.UpgradeInProgress, metav1.ConditionFalse, rayv1.SuspendInProgress)
	conditionIs(t, d.Status, rayv1.RollbackInProgress, metav1.ConditionFalse, rayv1.SuspendInProgress)
	if st := d.Status; st.ActiveServiceStatus.RayClusterName != "" || st.PendingServiceStatus.RayClusterName != "" || st.NumServeEndpoints != 0 ||
		st.ServiceStatus != rayv1.NotRunning || st.ObservedGeneration != 2 {
		t.Errorf("commit step status: %+v", st)
	}

	// The user changes their mind: the suspend, once stored, completes.
	w.svc.Spec.Suspend, w.svc.Generation = false, 3
	d = w.step(t)
	want := []string{"DeleteCluster " + name, "DeleteService svc-head-svc", "DeleteService svc-serve-svc"}
	if got := kinds(d); !slices.Equal(got, want) {
		t.Fatalf("deleting: %v, want %v", got, want)
	}
	for _, a := range d.Actions {
		if a.Why != whySuspended {
			t.Errorf("%s %s: why %q, want %q", a.Kind, a.Name, a.Why, whySuspended)
		}
	}
	conditionIs(t, d.Status, rayv1.RayServiceSuspending, metav1.ConditionTrue, rayv1.SuspendInProgress)
	if d.Status.ObservedGeneration != 2 {
		t.Errorf("observedGeneration = %d while deleting, want 2 (the generation the suspend began at)", d.Status.ObservedGeneration)
	}

	// The cluster is terminating, the Services gone: nothing more to delete, still waiting.
	w.clusters[name].DeletionTimestamp = &metav1.Time{Time: w.now}
	w.head, w.serveSvc = nil, nil
	if d = w.step(t); len(d.Actions) != 0 || condition(d.Status, rayv1.RayServiceSuspended) != nil {
		t.Fatalf("terminating: %v, Suspended %+v; want a wait", kinds(d), condition(d.Status, rayv1.RayServiceSuspended))
	}

	delete(w.clusters, name)
	w.pods = nil
	d = w.step(t)
	conditionIs(t, d.Status, rayv1.RayServiceSuspending, metav1.ConditionFalse, rayv1.SuspendComplete)
	conditionIs(t, d.Status, rayv1.RayServiceSuspended, metav1.ConditionTrue, rayv1.SuspendComplete)
	conditionIs(t, d.Status, rayv1.RayServiceReady, metav1.ConditionFalse, rayv1.SuspendComplete)

	// spec.suspend is false (since generation 3): the next step resumes, under a new name.
	w.now = w.now.Add(time.Hour)
	d = w.step(t)
	conditionIs(t, d.Status, rayv1.RayServiceSuspended, metav1.ConditionFalse, rayv1.RayServiceResumed)
	conditionIs(t, d.Status, rayv1.RayServiceReady, metav1.ConditionFalse, rayv1.RayServiceInitializing)
	if c := condition(d.Status, rayv1.RayServiceReady); !c.LastTransitionTime.Time.Equal(w.now) {
		t.Errorf("Ready's transition time %s, want now (%s): the initializing timeout counts from the resume", c.LastTransitionTime, w.now)
	}
	if next := d.Status.PendingServiceStatus.RayClusterName; next == "" || next == name || d.Status.ObservedGeneration != 3 {
		t.Fatalf("resumed: pending %q (old %q), observedGeneration %d", next, name, d.Status.ObservedGeneration)
	}
	if d = w.step(t); has(d, CreateCluster) == nil {
		t.Errorf("after the resume: %v, want the new cluster created", kinds(d))
	}
}

// A RayService created suspended is Suspended without creating anything, and a suspended one stays idle:
// no write, no poll, its observedGeneration kept.
func TestCreatedSuspended(t *testing.T) {
	w := newWorld(service(func(s *rayv1.RayService) { s.Spec.Suspend = true }))
	if d := w.step(t); len(d.Actions) != 0 {
		t.Fatalf("commit: %v", kinds(d))
	}
	d := w.step(t)
	conditionIs(t, d.Status, rayv1.RayServiceSuspended, metav1.ConditionTrue, rayv1.SuspendComplete)
	w.svc = w.svc.DeepCopy()
	w.svc.Generation = 5 // an edit while suspended
	before := *w.svc.Status.DeepCopy()
	d = w.step(t)
	if len(d.Actions) != 0 || d.RequeueAfter != 0 || d.Status.ObservedGeneration != before.ObservedGeneration {
		t.Errorf("suspended: %v, requeue %s, observedGeneration %d; want nothing", kinds(d), d.RequeueAfter, d.Status.ObservedGeneration)
	}
}
