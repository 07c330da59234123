package rayservice

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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
	d.wantRequeue(shared.Backoff(o.ServeFailures, PollInterval, MaxPollInterval))
	if st.PendingServiceStatus.RayClusterName == "" && o.Clusters[st.ActiveServiceStatus.RayClusterName] == nil {
		// No cluster to serve from: name the next one; it is created once the name is stored, so that a
		// restarted or second operator never makes another.
		st.ActiveServiceStatus = rayv1.RayServiceStatus{}
		nameNext(o, &d)
		setConditions(o, &d, 0)
		return d
	}
	reconcileClusters(o, &d)
	ready, stepping := serve(o, &d)
	labelHeads(o, &d)
	reconcileServices(o, &d, ready && !stepping)
	endpoints := serveEndpoints(o.Pods, servingCluster(o, st))
	if stepping {
		endpoints += serveEndpoints(o.Pods, st.PendingServiceStatus.RayClusterName) // the route sends it traffic too
	}
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
	if incremental(o.Service, o.Validation.IncrementalUpgrade) {
		// The first cluster serves at full capacity; an upgrade's starts at none.
		capacity := int32(100)
		if o.Clusters[d.Status.ActiveServiceStatus.RayClusterName] != nil {
			capacity = 0
		}
		d.Status.PendingServiceStatus.TargetCapacity = ptr.To(capacity)
	}
}

// serve reads and applies the Serve applications and, for an incremental RayService, runs its upgrade step:
// ready says whether the cluster that takes the RayService's Services serves, stepping whether an
// incremental upgrade is under way (the Services then stay on the active cluster).
func serve(o Observed, d *Decision) (ready, stepping bool) {
	svc, st := o.Service, &d.Status
	if !incremental(svc, o.Validation.IncrementalUpgrade) {
		return reconcileServe(o, d), false
	}
	if !upgrading(*st, o.Clusters) {
		ready = reconcileServe(o, d)
		return ready, reconcileIncremental(o, d, ready, false)
	}
	// Each cluster is put at the capacity the status asks; the one the traffic leaves keeps the config it
	// runs, the one it goes to gets the spec's.
	rolling := meta.IsStatusConditionTrue(st.Conditions, string(rayv1.RollbackInProgress))
	a, p := &st.ActiveServiceStatus, &st.PendingServiceStatus
	activeWant, pendingWant := Served{Config: svc.Spec.ServeConfigV2, Capacity: a.TargetCapacity}, Served{Config: svc.Spec.ServeConfigV2, Capacity: p.TargetCapacity}
	if !rolling {
		activeWant = keptConfig(o.Applied[a.RayClusterName], a.TargetCapacity)
	} else {
		pendingWant = keptConfig(o.Applied[p.RayClusterName], p.TargetCapacity)
	}
	activeServes := serveCluster(o, d, a.RayClusterName, a, activeWant, !rolling)
	pendingServes := serveCluster(o, d, p.RayClusterName, p, pendingWant, rolling)
	stepping = reconcileIncremental(o, d, activeServes, pendingServes)
	return activeServes, stepping
}

// keptConfig is what the cluster the traffic leaves is put at capacity with: the config it last accepted,
// never the spec's (the zero Served when unknown, which is never put).
func keptConfig(applied Served, capacity *int32) Served {
	return Served{Config: applied.Config, Hash: applied.Hash, Capacity: capacity}
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
	stepwise := incremental(svc, o.Validation.IncrementalUpgrade) && o.Clusters[st.ActiveServiceStatus.RayClusterName] != nil
	if rc == nil { // a named pending cluster not created yet (Next names one when the active one is gone)
		if stepwise && specChange(o.Clusters[st.ActiveServiceStatus.RayClusterName], svc) == unchanged {
			st.PendingServiceStatus = rayv1.RayServiceStatus{} // the spec went back before the upgrade began
			return
		}
		want := Cluster(svc, name)
		if stepwise {
			// The autoscaler sizes the new cluster as its target capacity grows, from each group's minimum.
			for i := range want.Spec.WorkerGroupSpecs {
				want.Spec.WorkerGroupSpecs[i].Replicas = nil
			}
		}
		d.Actions = append(d.Actions, Action{Kind: CreateCluster, Name: name, Cluster: want})
		return
	}
	if pending && stepwise && specChange(o.Clusters[st.ActiveServiceStatus.RayClusterName], svc) == unchanged {
		return // the spec went back to the active cluster's: a rollback (reconcileIncremental), not an update
	}
	switch specChange(rc, svc) {
	case inPlace, workersInPlace:
		d.Actions = append(d.Actions, Action{Kind: UpdateCluster, Name: name, Cluster: rebuilt(svc, rc)})
	case replaced:
		if pending && stepwise {
			return // an incremental upgrade rolls back to the active cluster instead (reconcileIncremental)
		}
		if pending || newClusterOnChange(svc, o.ZeroDowntime, o.Validation.IncrementalUpgrade) {
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
	for _, kept := range []string{constants.AnnotationDeletionDeadline, constants.AnnotationSwitchDeadline, constants.AnnotationServeApplied} {
		if v, ok := live.Annotations[kept]; ok {
			out.Annotations[kept] = v
		}
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
// NewClusterWithIncrementalUpgrade with its gate on, or none with zero-downtime upgrades on. None never
// does, nor NewClusterWithIncrementalUpgrade with its gate off (as KubeRay).
func newClusterOnChange(svc *rayv1.RayService, zeroDowntime, incrementalGate bool) bool {
	if s := svc.Spec.UpgradeStrategy; s != nil && s.Type != nil {
		return *s.Type == rayv1.RayServiceNewCluster || (incrementalGate && *s.Type == rayv1.RayServiceNewClusterWithIncrementalUpgrade)
	}
	return zeroDowntime
}

// ServeTarget is the cluster whose Serve applications a reconcile reads and applies: the pending cluster
// once it exists, else the active one unless its spec changed so that a new cluster is due (which then
// gets them); "" when there is none.
func ServeTarget(svc *rayv1.RayService, clusters map[string]*rayv1.RayCluster, zeroDowntime, incrementalGate bool) string {
	if name := svc.Status.PendingServiceStatus.RayClusterName; name != "" {
		if clusters[name] != nil {
			return name
		}
		return ""
	}
	name := svc.Status.ActiveServiceStatus.RayClusterName
	active := clusters[name]
	if active == nil || (specChange(active, svc) == replaced && newClusterOnChange(svc, zeroDowntime, incrementalGate)) {
		return ""
	}
	return name
}

// ServeReads are the clusters whose Serve applications a reconcile reads: ServeTarget's, and both clusters
// of an incremental upgrade under way.
func ServeReads(svc *rayv1.RayService, clusters map[string]*rayv1.RayCluster, zeroDowntime, incrementalGate bool) []string {
	if incremental(svc, incrementalGate) && upgrading(svc.Status, clusters) {
		return []string{svc.Status.ActiveServiceStatus.RayClusterName, svc.Status.PendingServiceStatus.RayClusterName}
	}
	if name := ServeTarget(svc, clusters, zeroDowntime, incrementalGate); name != "" {
		return []string{name}
	}
	return nil
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
