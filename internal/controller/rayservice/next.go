package rayservice

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/spec"
	"github.com/kray-project/kray/pkg/validation"
)

// Next decides, from what the reconciler observed, the RayService's next status and the writes that lead to
// it. It is pure; the reconciler makes the writes, then writes the status once.
func Next(o Observed) Decision {
	svc := o.Service
	d := Decision{Status: *svc.Status.DeepCopy()}
	if reason, err := validate(svc, o.Validation); err != nil {
		d.Invalid = true
		kind := "spec"
		if reason == EventInvalidRayServiceMetadata {
			kind = "metadata"
		}
		msg := fmt.Sprintf("The RayService %s is invalid %s/%s: %v", kind, svc.Namespace, svc.Name, err)
		setCondition(&d.Status, svc, rayv1.RayServiceReady, metav1.ConditionFalse, rayv1.RayServiceValidationFailed, msg, o.Now)
		d.Events = append(d.Events, shared.Warning(reason, msg))
		return d
	}
	st := &d.Status
	if suspend(o, &d) {
		return d
	}
	st.ObservedGeneration = svc.Generation
	if c := meta.FindStatusCondition(st.Conditions, string(rayv1.RayServiceReady)); c != nil && c.Reason == string(rayv1.RayServiceInitializingTimeout) {
		cleanUp(o, &d) // failed for good: every cluster goes, and nothing is polled
		return d
	}
	d.wantRequeue(PollInterval)
	if st.PendingServiceStatus.RayClusterName == "" && o.Clusters[st.ActiveServiceStatus.RayClusterName] == nil {
		// No cluster to serve from: name the next one; it is created once the name is stored, so that a
		// restarted or second operator never makes another.
		st.ActiveServiceStatus = rayv1.RayServiceStatus{}
		nameNext(o, &d)
		setConditions(o, &d, 0)
		return d
	}
	reconcileClusters(o, &d)
	ready := reconcileServe(o, &d)
	labelHeads(o, &d)
	reconcileServices(o, &d, ready)
	endpoints := serveEndpoints(o.Pods, servingCluster(o, st))
	failed := timedOut(o, &d, endpoints)
	cleanUp(o, &d) // after a timeout, every cluster
	if !failed {
		setConditions(o, &d, endpoints)
	}
	return d
}

// validate runs the metadata and spec checks under opts, returning the event reason of the first failure.
func validate(svc *rayv1.RayService, opts validation.RayServiceOptions) (string, error) {
	if err := validation.RayServiceMetadata(svc); err != nil {
		return EventInvalidRayServiceMetadata, err
	}
	if err := validation.RayServiceSpec(svc, opts); err != nil {
		return EventInvalidRayServiceSpec, err
	}
	return "", nil
}

// nameNext names the next cluster of the RayService as its pending one, from the reconcile's random
// suffix; a name one of its clusters already has is left for the next reconcile's suffix.
func nameNext(o Observed, d *Decision) {
	name := o.Service.Name + "-" + o.Suffix
	if o.Clusters[name] != nil || name == d.Status.ActiveServiceStatus.RayClusterName || name == d.Status.PendingServiceStatus.RayClusterName {
		d.wantRequeue(0)
		return
	}
	d.Status.PendingServiceStatus = rayv1.RayServiceStatus{RayClusterName: name}
}

// reconcileClusters creates the pending cluster, rebuilds the cluster being compared (the pending one, else
// the active one) in place when only worker groups were appended, and names a new pending cluster for any
// other change: always in place of a pending cluster that no longer matches, for the active one only when
// the upgrade strategy prepares new clusters.
func reconcileClusters(o Observed, d *Decision) {
	svc, st := o.Service, &d.Status
	name, pending := st.PendingServiceStatus.RayClusterName, true
	if name == "" {
		name, pending = st.ActiveServiceStatus.RayClusterName, false
	}
	rc := o.Clusters[name]
	if rc == nil && pending && o.PendingTaken {
		// Nothing was created under the stored name (someone else's cluster holds it): name another.
		d.Events = append(d.Events, shared.Warning(shared.EventFailedToCreateRayCluster, fmt.Sprintf(
			"RayCluster %s/%s exists and is not controlled by RayService %s/%s: kray does not use or change it, and names the pending cluster anew",
			svc.Namespace, name, svc.Namespace, svc.Name)))
		nameNext(o, d)
		return
	}
	if rc == nil { // a named pending cluster not created yet (Next names one when the active one is gone)
		d.Actions = append(d.Actions, Action{Kind: CreateCluster, Name: name, Cluster: Cluster(svc, name)})
		return
	}
	switch specChange(rc, svc) {
	case inPlace, workersInPlace:
		d.Actions = append(d.Actions, Action{Kind: UpdateCluster, Name: name, Cluster: rebuilt(svc, rc)})
	case replaced:
		if pending || newClusterOnChange(svc, o.ZeroDowntime) {
			nameNext(o, d) // a replaced pending cluster goes like any old cluster
		}
	}
}

// rebuilt is live with the spec, labels and annotations svc builds now, for an in-place update; an
// autoscaling cluster keeps each group's replicas and named deletions as the autoscaler left them.
func rebuilt(svc *rayv1.RayService, live *rayv1.RayCluster) *rayv1.RayCluster {
	want := Cluster(svc, live.Name)
	out := live.DeepCopy()
	if spec.AutoscalingEnabled(live) {
		for i := range want.Spec.WorkerGroupSpecs {
			g := &want.Spec.WorkerGroupSpecs[i]
			for j := range live.Spec.WorkerGroupSpecs {
				if l := &live.Spec.WorkerGroupSpecs[j]; l.GroupName == g.GroupName {
					g.Replicas, g.ScaleStrategy = l.Replicas, *l.ScaleStrategy.DeepCopy()
				}
			}
		}
	}
	out.Spec = want.Spec
	out.Labels = want.Labels
	out.Annotations = want.Annotations
	if deadline, ok := live.Annotations[constants.AnnotationDeletionDeadline]; ok {
		out.Annotations[constants.AnnotationDeletionDeadline] = deadline
	}
	return out
}

// change is how a cluster's spec relates to the RayService's rayClusterConfig.
type change int

const (
	// unchanged: the same spec, replica fields aside; nothing is written to the cluster.
	unchanged change = iota
	// inPlace: worker groups were appended (or the cluster's hash comes from another scheme); the
	// cluster's spec is rebuilt where it runs.
	inPlace
	// workersInPlace: only worker groups changed, and the RayService asks for such changes to roll through
	// the cluster in place (kray.io/in-place-worker-upgrade); the cluster's spec is rebuilt where it runs.
	workersInPlace
	// replaced: any other change; it takes a new cluster.
	replaced
)

// specChange is how rc's spec (by the annotations it was built with) relates to svc's rayClusterConfig.
func specChange(rc *rayv1.RayCluster, svc *rayv1.RayService) change {
	want := &svc.Spec.RayClusterSpec
	if rc.Annotations[constants.AnnotationKubeRayVersion] != HashScheme {
		return inPlace
	}
	built := rc.Annotations[constants.AnnotationClusterHash]
	if built == ClusterHash(want) {
		return unchanged
	}
	n, err := strconv.Atoi(rc.Annotations[constants.AnnotationNumWorkerGroups])
	if err == nil && n >= 0 && n < len(want.WorkerGroupSpecs) {
		first := want.DeepCopy()
		first.WorkerGroupSpecs = first.WorkerGroupSpecs[:n]
		if ClusterHash(first) == built {
			return inPlace
		}
	}
	if inPlaceWorkers(svc) && spec.Rolling(rc) && rc.Annotations[constants.AnnotationHeadHash] == HeadHash(want) {
		return workersInPlace
	}
	return replaced
}

// newClusterOnChange reports whether a changed cluster spec takes a new cluster: upgradeStrategy NewCluster,
// or none with zero-downtime upgrades on. None never does, nor NewClusterWithIncrementalUpgrade, which kray
// does not serve (as KubeRay v1.5.0 with its gate off).
func newClusterOnChange(svc *rayv1.RayService, zeroDowntime bool) bool {
	if s := svc.Spec.UpgradeStrategy; s != nil && s.Type != nil {
		return *s.Type == rayv1.RayServiceNewCluster
	}
	return zeroDowntime
}

// ServeTarget is the cluster whose Serve applications a reconcile reads and applies: the pending cluster
// once it exists, else the active one unless its spec changed so that a new cluster is due (which then
// gets them); "" when there is none.
func ServeTarget(svc *rayv1.RayService, clusters map[string]*rayv1.RayCluster, zeroDowntime bool) string {
	if name := svc.Status.PendingServiceStatus.RayClusterName; name != "" {
		if clusters[name] != nil {
			return name
		}
		return ""
	}
	name := svc.Status.ActiveServiceStatus.RayClusterName
	active := clusters[name]
	if active == nil || (specChange(active, svc) == replaced && newClusterOnChange(svc, zeroDowntime)) {
		return ""
	}
	return name
}

// withStatus is svc carrying st, for helpers that read the status being decided.
func withStatus(svc *rayv1.RayService, st *rayv1.RayServiceStatuses) *rayv1.RayService {
	out := *svc
	out.Status = *st
	return &out
}

// statusOf is the active or pending cluster status of st that names name, nil for none.
func statusOf(st *rayv1.RayServiceStatuses, name string) *rayv1.RayServiceStatus {
	switch {
	case name == "":
		return nil
	case st.PendingServiceStatus.RayClusterName == name:
		return &st.PendingServiceStatus
	case st.ActiveServiceStatus.RayClusterName == name:
		return &st.ActiveServiceStatus
	}
	return nil
}
