package rayservice

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// setConditions sets Ready (from the serve endpoints), UpgradeInProgress (from the clusters), the
// deprecated serviceStatus, numServeEndpoints, and the clusters' status copies.
func setConditions(o Observed, d *Decision, endpoints int32) {
	svc, st := o.Service, &d.Status
	for _, s := range []*rayv1.RayServiceStatus{&st.ActiveServiceStatus, &st.PendingServiceStatus} {
		if rc := o.Clusters[s.RayClusterName]; rc != nil {
			s.RayClusterStatus = *rc.Status.DeepCopy()
		} else {
			s.RayClusterStatus = rayv1.RayClusterStatus{}
		}
	}
	st.NumServeEndpoints = endpoints
	ready := meta.FindStatusCondition(st.Conditions, string(rayv1.RayServiceReady))
	switch {
	case endpoints > 0:
		setCondition(st, svc, rayv1.RayServiceReady, metav1.ConditionTrue, rayv1.NonZeroServeEndpoints, fmt.Sprintf("%d ready serve endpoints", endpoints), o.Now)
	case ready == nil || ready.Reason == string(rayv1.RayServiceInitializing):
		setCondition(st, svc, rayv1.RayServiceReady, metav1.ConditionFalse, rayv1.RayServiceInitializing, "Waiting for the first cluster to serve", o.Now)
	default:
		setCondition(st, svc, rayv1.RayServiceReady, metav1.ConditionFalse, rayv1.ZeroServeEndpoints, "The serve Service has no ready endpoint", o.Now)
	}
	st.ServiceStatus = rayv1.NotRunning
	if endpoints > 0 {
		st.ServiceStatus = rayv1.Running
	}
	active, pending := st.ActiveServiceStatus.RayClusterName, st.PendingServiceStatus.RayClusterName
	upgrade := meta.FindStatusCondition(st.Conditions, string(rayv1.UpgradeInProgress))
	switch {
	case active != "" && pending != "" && incremental(svc, o.Validation.IncrementalUpgrade) && upgrading(*st, o.Clusters):
		setCondition(st, svc, rayv1.UpgradeInProgress, metav1.ConditionTrue, rayv1.BothActivePendingClustersExist, incrementalMessage(o, st), o.Now)
	case active != "" && pending != "":
		setCondition(st, svc, rayv1.UpgradeInProgress, metav1.ConditionTrue, rayv1.BothActivePendingClustersExist, upgradeMessage(o, st), o.Now)
	case active != "":
		setCondition(st, svc, rayv1.UpgradeInProgress, metav1.ConditionFalse, rayv1.NoPendingCluster, "", o.Now)
	case upgrade == nil || upgrade.Reason == string(rayv1.RayServiceInitializing):
		setCondition(st, svc, rayv1.UpgradeInProgress, metav1.ConditionFalse, rayv1.RayServiceInitializing, "", o.Now)
	default:
		setCondition(st, svc, rayv1.UpgradeInProgress, metav1.ConditionUnknown, rayv1.NoActiveCluster, "", o.Now)
	}
}

// upgradeMessage says what the pending cluster still waits for before it takes the traffic.
func upgradeMessage(o Observed, st *rayv1.RayServiceStatuses) string {
	name := st.PendingServiceStatus.RayClusterName
	if o.Clusters[name] == nil {
		return fmt.Sprintf("Creating RayCluster %s", name)
	}
	if !podServes(headPod(o.Pods, name)) {
		return fmt.Sprintf("Waiting for the head of RayCluster %s to be ready", name)
	}
	w := switchWaitOf(o, o.Clusters[name])
	switch {
	case w.ready == 0:
		return fmt.Sprintf("Waiting for the Serve applications of RayCluster %s to run and for a ready serve endpoint on it", name)
	case w.short > 0 && w.marked:
		return fmt.Sprintf("Waiting for the Serve applications of RayCluster %s to run and for a ready serve endpoint on each of the %d pods Serve runs a proxy on (%d not ready), until %s at the latest",
			name, w.proxied, w.short, w.until.Format(time.RFC3339))
	case w.short > 0:
		return fmt.Sprintf("Waiting for the Serve applications of RayCluster %s to run and for a ready serve endpoint on each of the %d pods Serve runs a proxy on (%d not ready), for %s at most once they run",
			name, w.proxied, w.short, SwitchWait)
	}
	return fmt.Sprintf("Waiting for the Serve applications of RayCluster %s to run", name)
}

// setCondition sets a condition of the RayService's status at svc's generation.
func setCondition(st *rayv1.RayServiceStatuses, svc *rayv1.RayService, t rayv1.RayServiceConditionType, status metav1.ConditionStatus, reason rayv1.RayServiceConditionReason, msg string, now time.Time) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: string(t), Status: status, Reason: string(reason), Message: msg,
		ObservedGeneration: svc.Generation, LastTransitionTime: metav1.NewTime(now.UTC().Truncate(time.Second)),
	})
}
