package rayservice

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// KubeRay v1.7's words in the conditions of a suspend.
const (
	msgSuspendRequested = "Spec.Suspend is true; will delete all Kubernetes resources owned by this RayService."
	msgSuspending       = "RayService is suspending."
	msgWaitingDeletion  = "Waiting for all Kubernetes resources owned by this RayService to be deleted."
	msgAllDeleted       = "All owned resources have been deleted."
	msgSuspended        = "RayService is suspended."
	msgResumed          = "Spec.Suspend is false; RayService has resumed."
	msgResuming         = "RayService is initializing after resuming from suspend."
	msgNoUpgrade        = "No upgrade in progress."
	msgNoRollback       = "No rollback in progress."
	// whySuspended ends the events of the deletions a suspend makes.
	whySuspended = "during suspend"
)

// suspend runs KubeRay v1.7's suspend of a RayService and reports whether it holds the reconcile (nothing
// else is decided). As in KubeRay, the steps that start and end a suspension store the generation they
// acted on; one that is suspended, or still deleting, does not. spec.suspend true first stores Suspending (the commit point: serving stops, the status
// forgets its clusters); then every cluster of the RayService, its head and serve Services and its Gateway and HTTPRoute are deleted,
// whatever spec.suspend has become meanwhile, and once all are gone it is Suspended. spec.suspend false
// again resumes: Ready and UpgradeInProgress start over as Initializing (so the initializing timeout counts
// afresh), and the reconcile goes on to name a new cluster.
func suspend(o Observed, d *Decision) bool {
	svc, st := o.Service, &d.Status
	suspending := meta.IsStatusConditionTrue(st.Conditions, string(rayv1.RayServiceSuspending))
	suspended := meta.IsStatusConditionTrue(st.Conditions, string(rayv1.RayServiceSuspended))
	switch {
	case suspended && svc.Spec.Suspend:
		return true
	case suspended:
		st.ObservedGeneration = svc.Generation
		setCondition(st, svc, rayv1.RayServiceSuspended, metav1.ConditionFalse, rayv1.RayServiceResumed, msgResumed, o.Now)
		for _, t := range []rayv1.RayServiceConditionType{rayv1.RayServiceReady, rayv1.UpgradeInProgress} {
			meta.RemoveStatusCondition(&st.Conditions, string(t))
			setCondition(st, svc, t, metav1.ConditionFalse, rayv1.RayServiceInitializing, msgResuming, o.Now)
		}
		return false
	case !suspending && !svc.Spec.Suspend:
		return false
	case !suspending:
		st.ObservedGeneration = svc.Generation
		setCondition(st, svc, rayv1.RayServiceSuspending, metav1.ConditionTrue, rayv1.SuspendRequested, msgSuspendRequested, o.Now)
		setCondition(st, svc, rayv1.RayServiceReady, metav1.ConditionFalse, rayv1.SuspendInProgress, msgSuspending, o.Now)
		setCondition(st, svc, rayv1.UpgradeInProgress, metav1.ConditionFalse, rayv1.SuspendInProgress, msgNoUpgrade, o.Now)
		setCondition(st, svc, rayv1.RollbackInProgress, metav1.ConditionFalse, rayv1.SuspendInProgress, msgNoRollback, o.Now)
		st.ActiveServiceStatus, st.PendingServiceStatus = rayv1.RayServiceStatus{}, rayv1.RayServiceStatus{}
		st.NumServeEndpoints, st.ServiceStatus = 0, rayv1.NotRunning
		d.wantRequeue(0) // the deletions start once Suspending is stored
		return true
	}
	gone := true
	for _, name := range slices.Sorted(maps.Keys(o.Clusters)) {
		gone = false
		if rc := o.Clusters[name]; rc.DeletionTimestamp == nil {
			d.Actions = append(d.Actions, Action{Kind: DeleteCluster, Name: name, Cluster: rc, Why: whySuspended})
		}
	}
	for _, live := range []*corev1.Service{o.HeadService, o.ServeService} {
		if live == nil {
			continue
		}
		gone = false
		if live.DeletionTimestamp == nil {
			d.Actions = append(d.Actions, Action{Kind: DeleteService, Name: live.Name, Service: live, Why: whySuspended})
		}
	}
	var routing []client.Object
	if o.HTTPRoute != nil {
		routing = append(routing, o.HTTPRoute)
	}
	if o.Gateway != nil {
		routing = append(routing, o.Gateway)
	}
	for _, live := range routing {
		gone = false
		if live.GetDeletionTimestamp() == nil {
			d.Actions = append(d.Actions, Action{Kind: DeleteGateway, Name: live.GetName(), Object: live, Why: whySuspended})
		}
	}
	if !gone {
		setCondition(st, svc, rayv1.RayServiceSuspending, metav1.ConditionTrue, rayv1.SuspendInProgress, msgWaitingDeletion, o.Now)
		d.wantRequeue(PollInterval)
		return true
	}
	setCondition(st, svc, rayv1.RayServiceSuspending, metav1.ConditionFalse, rayv1.SuspendComplete, msgAllDeleted, o.Now)
	setCondition(st, svc, rayv1.RayServiceSuspended, metav1.ConditionTrue, rayv1.SuspendComplete, msgAllDeleted, o.Now)
	setCondition(st, svc, rayv1.RayServiceReady, metav1.ConditionFalse, rayv1.SuspendComplete, msgSuspended, o.Now)
	setCondition(st, svc, rayv1.UpgradeInProgress, metav1.ConditionFalse, rayv1.SuspendComplete, msgNoUpgrade, o.Now)
	setCondition(st, svc, rayv1.RollbackInProgress, metav1.ConditionFalse, rayv1.SuspendComplete, msgNoRollback, o.Now)
	// A spec.suspend turned false while the deletions ran is acted on by the next reconcile.
	d.wantRequeue(PollInterval)
	return true
}
