package rayservice

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/validation"
)

// deletionDelay is spec.rayClusterDeletionDelaySeconds, or DefaultDeletionDelay.
func deletionDelay(svc *rayv1.RayService) time.Duration {
	if s := svc.Spec.RayClusterDeletionDelaySeconds; s != nil && *s >= 0 {
		return time.Duration(*s) * time.Second
	}
	return DefaultDeletionDelay
}

// cleanUp gives every cluster of the RayService that is neither active nor pending a deletion deadline
// (stored on the cluster) and deletes it once the deadline passed and the stored status no longer names it
// either: were the cluster deleted in the reconcile whose status write lets it go, and that write lost, the
// next reconcile would create a cluster of the same name while the old one's pods are still collected. A
// cluster that serves again loses its deadline.
func cleanUp(o Observed, d *Decision) {
	st, stored := &d.Status, &o.Service.Status
	for _, name := range slices.Sorted(maps.Keys(o.Clusters)) {
		rc := o.Clusters[name]
		mark, marked := rc.Annotations[constants.AnnotationDeletionDeadline]
		if namesCluster(st, name) {
			if marked {
				d.Actions = append(d.Actions, Action{Kind: MarkCluster, Name: name, Cluster: rc})
			}
			continue
		}
		if rc.DeletionTimestamp != nil {
			continue
		}
		deadline, err := time.Parse(time.RFC3339, mark)
		if !marked || err != nil {
			deadline = o.Now.Add(deletionDelay(o.Service)).UTC().Truncate(time.Second)
			d.Actions = append(d.Actions, Action{Kind: MarkCluster, Name: name, Cluster: rc, Deadline: deadline})
		}
		left := deadline.Sub(o.Now)
		if left > 0 || namesCluster(stored, name) {
			d.wantRequeue(left) // a stored name goes with this reconcile's status write: soon after it
			continue
		}
		d.Actions = append(d.Actions, Action{Kind: DeleteCluster, Name: name, Cluster: rc})
	}
}

// namesCluster reports whether st names the cluster name as its active or pending one.
func namesCluster(st *rayv1.RayServiceStatuses, name string) bool {
	return name == st.ActiveServiceStatus.RayClusterName || name == st.PendingServiceStatus.RayClusterName
}

// timedOut fails the RayService for good when it has been Initializing, with no serve endpoint, for longer
// than its ray.io/initializing-timeout: its clusters are let go (and deleted after the deletion delay),
// Ready is False with reason InitializingTimeout.
func timedOut(o Observed, d *Decision, endpoints int32) bool {
	svc, st := o.Service, &d.Status
	timeout, err := validation.InitializingTimeout(svc.Annotations)
	if err != nil || timeout <= 0 || endpoints > 0 {
		return false
	}
	since := svc.CreationTimestamp.Time
	if c := meta.FindStatusCondition(st.Conditions, string(rayv1.RayServiceReady)); c != nil {
		if c.Reason != string(rayv1.RayServiceInitializing) {
			return false
		}
		since = c.LastTransitionTime.Time
	}
	if left := since.Add(timeout).Sub(o.Now); left > 0 {
		d.wantRequeue(left)
		return false
	}
	st.ActiveServiceStatus, st.PendingServiceStatus = rayv1.RayServiceStatus{}, rayv1.RayServiceStatus{}
	msg := fmt.Sprintf("The RayService did not serve within its %s of %s; its clusters are released", constants.AnnotationInitializingTimeout, timeout)
	setCondition(st, svc, rayv1.RayServiceReady, metav1.ConditionFalse, rayv1.RayServiceInitializingTimeout, msg, o.Now)
	st.NumServeEndpoints, st.ServiceStatus = 0, rayv1.NotRunning
	d.Events = append(d.Events, shared.Warning(EventRayServiceInitializingTimeout, fmt.Sprintf("RayService %s/%s: %s", svc.Namespace, svc.Name, msg)))
	return true
}
