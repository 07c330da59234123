package rayservice

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
)

// An incremental upgrade (KubeRay v1.7's NewClusterWithIncrementalUpgrade) moves a RayService to a new
// cluster in steps, through the Gateway API. The pending cluster starts at target capacity 0; then, one step
// per reconcile, in this order: the pending cluster's Serve target_capacity rises by maxSurgePercent; the
// HTTPRoute moves stepSizePercent of the traffic to it every intervalSeconds until its weight reaches its
// capacity; the active cluster's capacity falls by maxSurgePercent once the two capacities add up to more
// than 100; and so on until the pending cluster takes all the traffic at capacity 100 with the active one
// at 0, when it becomes the active cluster. Everything is stored in the status (capacities) and in the
// HTTPRoute (weights), so a restarted operator goes on where it stopped. A spec that goes back mid-way (or
// to a third spec) rolls back the same way, towards the active cluster. Traffic moves to a cluster only
// while it serves: its applications run at the capacity asked, and it has a ready serve endpoint.

// Rollback messages, KubeRay v1.7's.
const (
	msgRollbackReverted = "Goal state reverted to original cluster, rolling back."
	msgRollbackChanged  = "Goal state changed mid-upgrade, rolling back to original cluster."
)

// incremental reports whether svc upgrades incrementally: it asks for NewClusterWithIncrementalUpgrade and
// the RayServiceIncrementalUpgrade gate is on.
func incremental(svc *rayv1.RayService, gate bool) bool {
	s := svc.Spec.UpgradeStrategy
	return gate && s != nil && s.Type != nil && *s.Type == rayv1.RayServiceNewClusterWithIncrementalUpgrade
}

// upgrading reports whether st names an active and a pending cluster that both exist.
func upgrading(st rayv1.RayServiceStatuses, clusters map[string]*rayv1.RayCluster) bool {
	a, p := st.ActiveServiceStatus.RayClusterName, st.PendingServiceStatus.RayClusterName
	return a != "" && p != "" && clusters[a] != nil && clusters[p] != nil
}

// percentOr is *p, or def when nil.
func percentOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// traffic is one step's view of the two clusters: their target capacities (asked in the status) and their
// weights (in the live HTTPRoute).
type traffic struct {
	activeCapacity, pendingCapacity int32
	activeWeight, pendingWeight     int32
}

// reconcileIncremental runs an incremental upgrade's step for the reconcile, given whether each cluster
// serves its applications (all RUNNING at the capacity asked): the Gateway, the clusters' serve Services,
// the rollback decision, one capacity or traffic step, the promotion or the end of a rollback, and the
// HTTPRoute. It reports whether an upgrade is still under way (the RayService's Services stay on the active
// cluster).
func reconcileIncremental(o Observed, d *Decision, activeServes, pendingServes bool) bool {
	svc, st := o.Service, &d.Status
	syncGateway(o, d)
	active, pending := o.Clusters[st.ActiveServiceStatus.RayClusterName], o.Clusters[st.PendingServiceStatus.RayClusterName]
	if active == nil {
		return false // the first cluster: no route until it serves and is the active one
	}
	for _, rc := range []*rayv1.RayCluster{active, pending} {
		if rc != nil && o.ClusterServeServices[rc.Name] == nil {
			if s := ClusterServeService(svc, rc); s != nil {
				d.Actions = append(d.Actions, Action{Kind: CreateService, Name: s.Name, Service: s})
			}
		}
	}
	t := observeTraffic(o, st, pending != nil)
	underWay := pending != nil
	if underWay {
		rollingBack := decideRollback(o, d)
		if gatewayReady(o.Gateway) && routeReady(svc, o.HTTPRoute) {
			step(o, d, &t, rollingBack, activeServes, pendingServes)
			// The status holds the weights the route is given, so a route that loses them gets them back.
			setTraffic(&st.ActiveServiceStatus, t.activeWeight, o.Now)
			setTraffic(&st.PendingServiceStatus, t.pendingWeight, o.Now)
		}
		underWay = finish(o, d, t, rollingBack, activeServes, pendingServes)
	}
	syncRoute(o, d, t)
	return underWay
}

// observeTraffic reads the weights of the live route into the status (a weight that changed dates
// lastTrafficMigratedTime now) and returns them with the capacities. A cluster the route does not name (a
// route recreated mid-upgrade, or written by a promotion whose status write was lost) keeps the weight the
// status holds; with none stored, 100 for the active cluster and 0 for the pending one. When the two weights
// do not add up to 100, the status's are kept: traffic never jumps to a cluster whose capacity was not
// raised for it.
func observeTraffic(o Observed, st *rayv1.RayServiceStatuses, withPending bool) traffic {
	a, p := &st.ActiveServiceStatus, &st.PendingServiceStatus
	t := traffic{activeCapacity: percentOr(a.TargetCapacity, 100), pendingCapacity: percentOr(p.TargetCapacity, 0),
		activeWeight: percentOr(a.TrafficRoutedPercent, 100)}
	if withPending {
		t.pendingWeight = percentOr(p.TrafficRoutedPercent, 0)
	}
	aw, pw, hasA, hasP := routeWeights(o.HTTPRoute, a.RayClusterName, p.RayClusterName)
	if !withPending {
		if hasA {
			t.activeWeight = aw
			setTraffic(a, aw, o.Now)
		}
		return t
	}
	if !hasA {
		aw = t.activeWeight
	}
	if !hasP {
		pw = t.pendingWeight
	}
	if aw+pw != 100 {
		if t.activeWeight+t.pendingWeight != 100 {
			t.activeWeight = 100 - t.pendingWeight
		}
		return t
	}
	t.activeWeight, t.pendingWeight = aw, pw
	setTraffic(a, aw, o.Now)
	setTraffic(p, pw, o.Now)
	return t
}

// setTraffic stores weight as s's trafficRoutedPercent, dating the change.
func setTraffic(s *rayv1.RayServiceStatus, weight int32, now time.Time) {
	if s.TrafficRoutedPercent != nil && *s.TrafficRoutedPercent == weight {
		return
	}
	s.TrafficRoutedPercent = ptr.To(weight)
	s.LastTrafficMigratedTime = &metav1.Time{Time: now.UTC().Truncate(time.Second)}
}

// decideRollback sets RollbackInProgress from where the spec points mid-upgrade: back to the active
// cluster's spec, or to a third one, rolls back; to the pending cluster's again, cancels the rollback. It
// reports whether a rollback is under way.
func decideRollback(o Observed, d *Decision) bool {
	svc, st := o.Service, &d.Status
	rolling := meta.IsStatusConditionTrue(st.Conditions, string(rayv1.RollbackInProgress))
	pending := o.Clusters[st.PendingServiceStatus.RayClusterName]
	active := o.Clusters[st.ActiveServiceStatus.RayClusterName]
	reverted := specChange(active, svc) == unchanged // before the pending cluster: its spec plus groups may read as an append
	switch {
	case !reverted && specChange(pending, svc) != replaced:
		meta.RemoveStatusCondition(&st.Conditions, string(rayv1.RollbackInProgress))
		return false
	case rolling:
		return true
	case reverted:
		setCondition(st, svc, rayv1.RollbackInProgress, metav1.ConditionTrue, rayv1.DesiredClusterSpecChanged, msgRollbackReverted, o.Now)
	default:
		setCondition(st, svc, rayv1.RollbackInProgress, metav1.ConditionTrue, rayv1.DesiredClusterSpecChanged, msgRollbackChanged, o.Now)
	}
	return true
}

// step makes at most one move of the upgrade (or rollback), only while the cluster gaining the traffic
// serves (its applications run at the capacity asked): traffic towards it, once an interval passed since its
// last move and while it has a ready serve endpoint, until its weight reaches its capacity; else a capacity
// step. The cluster losing the traffic gives up capacity only once the two add up to more than 100, never
// below its weight; the one gaining it grows by maxSurgePercent otherwise, once Serve has taken the losing
// cluster's last cut. So at every step each cluster's capacity, in the status and on Serve, covers its
// traffic, and the capacities Serve runs add up to at most 100 + maxSurgePercent. A cluster at capacity 0
// runs no replica and so no proxy: its first capacity step needs no endpoint.
func step(o Observed, d *Decision, t *traffic, rollingBack, activeServes, pendingServes bool) {
	svc, st := o.Service, &d.Status
	opts := upgradeOptions(svc)
	surge, stepSize := percentOr(opts.MaxSurgePercent, 100), percentOr(opts.StepSizePercent, 0)
	interval := time.Duration(percentOr(opts.IntervalSeconds, 0)) * time.Second
	gain, lose := &st.PendingServiceStatus, &st.ActiveServiceStatus
	gainCap, loseCap, gainWeight, loseWeight, gainServes := &t.pendingCapacity, &t.activeCapacity, &t.pendingWeight, &t.activeWeight, pendingServes
	if rollingBack {
		gain, lose = lose, gain
		gainCap, loseCap, gainWeight, loseWeight, gainServes = loseCap, gainCap, loseWeight, gainWeight, activeServes
	}
	if !gainServes {
		return // traffic and capacity move only while the cluster gaining them serves at the capacity asked
	}
	if *gainWeight != *gainCap {
		if serveEndpoints(o.Pods, gain.RayClusterName) == 0 {
			return // traffic goes only where a serve endpoint is ready (Serve runs proxies where replicas run)
		}
		if last := gain.LastTrafficMigratedTime; last != nil && o.Now.Sub(last.Time) < interval {
			d.wantRequeue(last.Add(interval).Sub(o.Now))
			return
		}
		*gainWeight = min(100, *gainWeight+stepSize, *gainCap)
		*loseWeight = 100 - *gainWeight
		return
	}
	if *gainCap == 100 && *loseCap == 0 {
		return // done: the promotion (or the rollback's end) follows
	}
	var target *rayv1.RayServiceStatus
	switch {
	case *gainCap+*loseCap > 100:
		// Never below the traffic the losing cluster still carries.
		*loseCap, target = max(0, *loseCap-surge, *loseWeight), lose
		target.TargetCapacity = ptr.To(*loseCap)
	case !loseSettled(o, lose):
		return // the losing cluster's Serve has not taken its last cut: raising the other would overshoot
	default:
		*gainCap, target = min(100, *gainCap+surge), gain
		target.TargetCapacity = ptr.To(*gainCap)
	}
	d.Events = append(d.Events, shared.Normal(EventUpdatedServeTargetCapacity, fmt.Sprintf(
		"Updated target_capacity of serve applications to %d%% on the RayCluster %s/%s", *target.TargetCapacity, svc.Namespace, target.RayClusterName)))
}

// loseSettled reports whether the cluster losing the traffic runs at the capacity the status asks of it,
// whatever its applications' health: its Serve took that capacity from kray (recorded), or reports it; or
// the cluster no longer serves at all.
func loseSettled(o Observed, lose *rayv1.RayServiceStatus) bool {
	want := percentOr(lose.TargetCapacity, 100)
	if applied, ok := o.Applied[lose.RayClusterName]; ok && percentOr(applied.Capacity, 100) == want {
		return true
	}
	if read := o.Serve[lose.RayClusterName]; read.Err == nil && read.Details != nil && servesCapacity(read.Details, ptr.To(want)) {
		return true
	}
	return !podServes(headPod(o.Pods, lose.RayClusterName))
}

// finish promotes the pending cluster once it has all the traffic at capacity 100 and the active one runs
// at capacity 0, or ends a rollback once the active cluster has all the traffic at capacity 100 and the
// pending one runs at capacity 0. "Runs at capacity 0" is Serve's answer to a capacity stored by an earlier
// reconcile, or a head that no longer serves. It reports whether the upgrade is still under way.
func finish(o Observed, d *Decision, t traffic, rollingBack, activeServes, pendingServes bool) bool {
	st, stored := &d.Status, &o.Service.Status
	settled := func(s *rayv1.RayServiceStatus, serves bool) bool {
		return !podServes(headPod(o.Pods, s.RayClusterName)) || (percentOr(s.TargetCapacity, 100) == 0 && serves)
	}
	switch {
	case !rollingBack && t.pendingCapacity == 100 && t.pendingWeight == 100 && t.activeCapacity == 0 && settled(&stored.ActiveServiceStatus, activeServes):
		st.ActiveServiceStatus = st.PendingServiceStatus
		st.PendingServiceStatus = rayv1.RayServiceStatus{}
		return false
	case rollingBack && t.activeCapacity == 100 && t.activeWeight == 100 && settled(&stored.PendingServiceStatus, pendingServes):
		st.PendingServiceStatus = rayv1.RayServiceStatus{}
		meta.RemoveStatusCondition(&st.Conditions, string(rayv1.RollbackInProgress))
		return false
	}
	return true
}

// syncGateway asks for the RayService's Gateway when it is missing or differs from the one it builds; a
// Gateway API that cannot be read is reported instead.
func syncGateway(o Observed, d *Decision) {
	svc := o.Service
	if o.GatewayErr != nil {
		d.Events = append(d.Events, shared.Warning(EventFailedToCreateGateway, fmt.Sprintf("Failed to create Gateway for RayService %s/%s: %v", svc.Namespace, svc.Name, o.GatewayErr)))
		return
	}
	want := Gateway(svc)
	if o.Gateway == nil || !gatewayMatches(o.Gateway, want) {
		a := Action{Kind: SyncGateway, Name: want.Name, Object: want}
		if o.Gateway != nil {
			a.Live = o.Gateway
		}
		d.Actions = append(d.Actions, a)
	}
}

// syncRoute asks for the RayService's HTTPRoute with t's weights, once its Gateway exists: the active
// cluster's serve Service, and the pending cluster's while one exists.
func syncRoute(o Observed, d *Decision, t traffic) {
	svc, st := o.Service, &d.Status
	if o.GatewayErr != nil || o.Gateway == nil {
		return // a route waits for the RayService's own Gateway: it never attaches to another's
	}
	active := o.Clusters[st.ActiveServiceStatus.RayClusterName]
	if active == nil {
		return
	}
	backends := []Backend{{Cluster: active, Weight: t.activeWeight}}
	if pending := o.Clusters[st.PendingServiceStatus.RayClusterName]; pending != nil {
		backends = append(backends, Backend{Cluster: pending, Weight: t.pendingWeight})
	} else {
		backends[0].Weight = 100
	}
	want := HTTPRoute(svc, backends...)
	if o.HTTPRoute == nil || !routeMatches(o.HTTPRoute, want) {
		a := Action{Kind: SyncGateway, Name: want.Name, Object: want}
		if o.HTTPRoute != nil {
			a.Live = o.HTTPRoute
		}
		d.Actions = append(d.Actions, a)
	}
}

// incrementalMessage is UpgradeInProgress's message during an incremental upgrade: where the traffic and
// the capacities stand, and what the next step waits for.
func incrementalMessage(o Observed, st *rayv1.RayServiceStatuses) string {
	a, p := &st.ActiveServiceStatus, &st.PendingServiceStatus
	msg := fmt.Sprintf("Incremental upgrade from RayCluster %s (traffic %d%%, target capacity %d%%) to RayCluster %s (traffic %d%%, target capacity %d%%)",
		a.RayClusterName, percentOr(a.TrafficRoutedPercent, 100), percentOr(a.TargetCapacity, 100),
		p.RayClusterName, percentOr(p.TrafficRoutedPercent, 0), percentOr(p.TargetCapacity, 0))
	switch {
	case o.GatewayErr != nil:
		return msg + "; the Gateway API cannot be read: " + o.GatewayErr.Error()
	case !gatewayReady(o.Gateway):
		return msg + fmt.Sprintf("; waiting for Gateway %s/%s to be accepted and programmed by the controller of class %s", o.Service.Namespace, GatewayName(o.Service), upgradeOptions(o.Service).GatewayClassName)
	case !routeReady(o.Service, o.HTTPRoute):
		return msg + fmt.Sprintf("; waiting for HTTPRoute %s/%s to be accepted by its Gateway with its backends resolved", o.Service.Namespace, HTTPRouteName(o.Service))
	}
	gain := p
	if meta.IsStatusConditionTrue(st.Conditions, string(rayv1.RollbackInProgress)) {
		gain = a
	}
	if percentOr(gain.TargetCapacity, 0) > percentOr(gain.TrafficRoutedPercent, 0) && serveEndpoints(o.Pods, gain.RayClusterName) == 0 {
		return msg + fmt.Sprintf("; traffic waits for a ready serve endpoint of RayCluster %s (Serve runs its proxies where replicas run)", gain.RayClusterName)
	}
	return msg
}
