package rayservice

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/dashboard"
)

// stepwise asks for an incremental upgrade with the given surge, step and interval.
func stepwise(surge, step, interval int32) func(*rayv1.RayService) {
	return func(s *rayv1.RayService) {
		s.Spec.RayClusterSpec.EnableInTreeAutoscaling = ptr.To(true)
		s.Spec.UpgradeStrategy = &rayv1.RayServiceUpgradeStrategy{Type: ptr.To(rayv1.RayServiceNewClusterWithIncrementalUpgrade),
			ClusterUpgradeOptions: &rayv1.ClusterUpgradeOptions{MaxSurgePercent: ptr.To(surge), StepSizePercent: ptr.To(step),
				IntervalSeconds: ptr.To(interval), GatewayClassName: "istio"}}
	}
}

// settle makes d's writes as the API server, a Gateway controller that accepts everything and Serve would:
// clusters are created with ready pods, configs are accepted and run, the Gateway and HTTPRoute are stored
// accepted, and the Services follow.
func (w *world) settle(d Decision) {
	w.apply(d)
	accepted := []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue}, {Type: "Programmed", Status: metav1.ConditionTrue}, {Type: "ResolvedRefs", Status: metav1.ConditionTrue}}
	for _, a := range d.Actions {
		switch a.Kind {
		case CreateCluster:
			w.addCluster(a.Name)
			w.clusters[a.Name].Spec = a.Cluster.Spec
			w.serve[a.Name] = ServeRead{Details: &dashboard.ServeDetails{}}
		case ApplyServe:
			w.applied[a.Name] = Served{Config: a.Config, Capacity: a.Capacity}
			var tc *float64
			if a.Capacity != nil {
				tc = ptr.To(float64(*a.Capacity))
			}
			w.serve[a.Name] = ServeRead{Details: &dashboard.ServeDetails{Applications: map[string]dashboard.ServeApplication{"fruit": {Status: "RUNNING"}}, TargetCapacity: tc}}
		case CreateService:
			w.clusterSvcs[a.Service.Labels[constants.LabelCluster]] = a.Service
		case SyncGateway:
			switch o := a.Object.(type) {
			case *gwv1.Gateway:
				w.gateway = o.DeepCopy()
				w.gateway.Status.Conditions = accepted
			case *gwv1.HTTPRoute:
				w.route = o.DeepCopy()
				w.route.Status.Parents = []gwv1.RouteParentStatus{{ParentRef: o.Spec.ParentRefs[0], Conditions: accepted}}
			}
		case DeleteCluster:
			delete(w.clusters, a.Name)
		}
	}
}

// split is one observed state of an incremental upgrade.
type split struct{ activeCap, pendingCap, activeWeight, pendingWeight int32 }

// upgradeUntil runs reconciles every 5 s (settling each) until done says so, recording each new split.
func (w *world) upgradeUntil(t *testing.T, done func() bool) []split {
	t.Helper()
	var trace []split
	for i := 0; i < 200 && !done(); i++ {
		d := w.step(t)
		if d.Invalid {
			t.Fatalf("refused: %+v", w.svc.Status.Conditions)
		}
		w.settle(d)
		st := w.svc.Status
		aw, pw, _, _ := routeWeights(w.route, st.ActiveServiceStatus.RayClusterName, st.PendingServiceStatus.RayClusterName)
		s := split{percentOr(st.ActiveServiceStatus.TargetCapacity, 100), percentOr(st.PendingServiceStatus.TargetCapacity, 0), aw, pw}
		if len(trace) == 0 || trace[len(trace)-1] != s {
			trace = append(trace, s)
		}
		w.now = w.now.Add(5 * time.Second)
	}
	if !done() {
		t.Fatalf("not done after 200 reconciles: %+v", trace)
	}
	return trace
}

// incrementalWorld is a RayService serving from its first cluster under an incremental upgrade strategy.
func incrementalWorld(t *testing.T, surge, step, interval int32) (*world, string) {
	t.Helper()
	w := newWorld(service(stepwise(surge, step, interval)))
	w.gate, w.clusterSvcs = true, map[string]*corev1.Service{}
	w.upgradeUntil(t, func() bool { return w.route != nil && w.svc.Status.ActiveServiceStatus.RayClusterName != "" })
	first := w.svc.Status.ActiveServiceStatus.RayClusterName
	if tc := w.svc.Status.ActiveServiceStatus.TargetCapacity; tc == nil || *tc != 100 || w.applied[first].Capacity == nil || *w.applied[first].Capacity != 100 {
		t.Fatalf("first cluster: target capacity %v, Serve put at %v; want 100", tc, w.applied[first].Capacity)
	}
	if !selects(w.head, first) || w.gateway == nil || string(w.gateway.Spec.GatewayClassName) != "istio" {
		t.Fatalf("first cluster: head Service %v, Gateway %v", w.head, w.gateway)
	}
	return w, first
}

// KubeRay v1.7's incremental upgrade, step by step: the new cluster's capacity rises by the surge, traffic
// follows it a step per interval, the old cluster's capacity falls by the surge, and so on; the two
// capacities never add up to more than 100 + surge, and once the old cluster's Serve runs at capacity 0 the
// new cluster is the active one.
func TestIncrementalUpgradeSteps(t *testing.T) {
	w, old := incrementalWorld(t, 50, 25, 10)
	w.svc.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
	w.svc.Generation++
	var last time.Time
	var moves []time.Duration
	trace := w.upgradeUntil(t, func() bool {
		p := w.svc.Status.PendingServiceStatus
		if p.LastTrafficMigratedTime != nil && !p.LastTrafficMigratedTime.Time.Equal(last) {
			if !last.IsZero() {
				moves = append(moves, p.LastTrafficMigratedTime.Sub(last))
			}
			last = p.LastTrafficMigratedTime.Time
		}
		return w.svc.Status.ActiveServiceStatus.RayClusterName != old && w.svc.Status.PendingServiceStatus.RayClusterName == ""
	})
	want := []split{
		{100, 0, 100, 0}, {100, 50, 100, 0}, {100, 50, 75, 25}, {100, 50, 50, 50}, {50, 50, 50, 50}, {50, 100, 50, 50},
		{50, 100, 25, 75}, {50, 100, 0, 100}, {0, 100, 0, 100}, {100, 0, 100, 0},
	}
	if fmt.Sprint(trace) != fmt.Sprint(want) {
		t.Errorf("splits (active capacity, pending capacity, active weight, pending weight):\n got %v\nwant %v", trace, want)
	}
	for _, m := range moves {
		if m < 10*time.Second {
			t.Errorf("traffic moved %s after the previous move, under the 10 s interval (moves %v)", m, moves)
		}
	}
	active := w.svc.Status.ActiveServiceStatus.RayClusterName
	if !selects(w.head, active) || len(w.route.Spec.Rules[0].BackendRefs) != 1 || string(w.route.Spec.Rules[0].BackendRefs[0].Name) != active+"-serve-svc" {
		t.Errorf("after the upgrade: head Service on %v, route %+v; want both on %s", w.head.Spec.Selector, w.route.Spec.Rules[0].BackendRefs, active)
	}
	if c := condition(w.svc.Status, rayv1.UpgradeInProgress); c.Status != metav1.ConditionFalse {
		t.Errorf("UpgradeInProgress %+v after the upgrade", c)
	}
	if w.clusterSvcs[active] == nil || w.clusterSvcs[active].OwnerReferences[0].Name != active {
		t.Errorf("the new cluster's serve Service %+v, want one owned by it", w.clusterSvcs[active])
	}
}

// The pending cluster is created with no worker replicas (the autoscaler sizes it as its capacity grows), at
// target capacity 0, and neither traffic nor capacity moves to it before it serves.
func TestIncrementalTrafficWaitsForServe(t *testing.T) {
	w, _ := incrementalWorld(t, 100, 100, 1)
	w.svc.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
	d := w.step(t)
	w.settle(d)
	pending := w.svc.Status.PendingServiceStatus
	if pending.TargetCapacity == nil || *pending.TargetCapacity != 0 {
		t.Fatalf("pending %+v, want target capacity 0", pending)
	}
	d = w.step(t)
	create := has(d, CreateCluster)
	if create == nil || create.Cluster.Spec.WorkerGroupSpecs[0].Replicas != nil {
		t.Fatalf("actions %v, want the pending cluster created with no replicas", kinds(d))
	}
	w.settle(d)
	w.serve[pending.RayClusterName] = ServeRead{Details: &dashboard.ServeDetails{Applications: map[string]dashboard.ServeApplication{"fruit": {Status: "DEPLOYING"}}}}
	for i := 0; i < 10; i++ {
		w.now = w.now.Add(5 * time.Second)
		d := w.step(t)
		w.settle(d)
		w.serve[pending.RayClusterName] = ServeRead{Details: &dashboard.ServeDetails{Applications: map[string]dashboard.ServeApplication{"fruit": {Status: "DEPLOYING"}}}}
		if _, pw, _, _ := routeWeights(w.route, w.svc.Status.ActiveServiceStatus.RayClusterName, pending.RayClusterName); pw != 0 {
			t.Fatalf("reconcile %d: %d%% of the traffic on a pending cluster whose applications deploy", i, pw)
		}
	}
	if tc := w.svc.Status.PendingServiceStatus.TargetCapacity; tc == nil || *tc != 0 {
		t.Fatalf("pending target capacity %v while its applications deploy, want 0", tc)
	}
	if c := condition(w.svc.Status, rayv1.UpgradeInProgress); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "target capacity 100%") {
		t.Errorf("UpgradeInProgress %+v, want True saying where the capacities stand", c)
	}
}

// A spec that goes back to the active cluster's mid-way rolls back: RollbackInProgress, traffic and capacity
// return to the active cluster, the pending one is let go; a spec that goes to the pending one's again
// cancels the rollback.
func TestIncrementalRollback(t *testing.T) {
	w, old := incrementalWorld(t, 50, 25, 10)
	image := func(v string) {
		w.svc.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:" + v
	}
	image("2.47.0")
	w.upgradeUntil(t, func() bool {
		_, pw, _, _ := routeWeights(w.route, old, w.svc.Status.PendingServiceStatus.RayClusterName)
		return pw == 50
	})
	pending := w.svc.Status.PendingServiceStatus.RayClusterName
	image("2.46.0") // back
	w.step(t)
	if c := condition(w.svc.Status, rayv1.RollbackInProgress); c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(rayv1.DesiredClusterSpecChanged) || c.Message != msgRollbackReverted {
		t.Fatalf("RollbackInProgress %+v", c)
	}
	image("2.47.0") // forward again: the rollback is cancelled
	w.step(t)
	if c := condition(w.svc.Status, rayv1.RollbackInProgress); c != nil {
		t.Fatalf("RollbackInProgress %+v after the spec went to the pending cluster's again, want none", c)
	}
	image("2.46.0")
	trace := w.upgradeUntil(t, func() bool { return w.svc.Status.PendingServiceStatus.RayClusterName == "" })
	for _, s := range trace {
		if s.activeCap+s.pendingCap > 150 {
			t.Errorf("capacities %v add up to more than 100 + surge", s)
		}
	}
	if got := trace[len(trace)-1]; got != (split{100, 0, 100, 0}) || w.svc.Status.ActiveServiceStatus.RayClusterName != old {
		t.Errorf("after the rollback: %v on %s, want all on %s (trace %v)", got, w.svc.Status.ActiveServiceStatus.RayClusterName, old, trace)
	}
	if condition(w.svc.Status, rayv1.RollbackInProgress) != nil {
		t.Error("RollbackInProgress left after the rollback")
	}
	d := w.step(t)
	if mark := has(d, MarkCluster); mark == nil || mark.Name != pending {
		t.Errorf("actions %v, want the pending cluster %s marked for deletion", kinds(d), pending)
	}
}

// With the gate off, NewClusterWithIncrementalUpgrade acts as None (KubeRay's): the first cluster is
// created, a spec change makes no new cluster and no Gateway.
func TestIncrementalUpgradeGateOff(t *testing.T) {
	w, first := serving(t, stepwise(50, 25, 10))
	w.svc.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
	d := w.step(t)
	if w.svc.Status.PendingServiceStatus.RayClusterName != "" || has(d, SyncGateway) != nil || w.svc.Status.ActiveServiceStatus.RayClusterName != first {
		t.Errorf("gate off: pending %q, actions %v", w.svc.Status.PendingServiceStatus.RayClusterName, kinds(d))
	}
}

// A Gateway API the API server does not serve is said in a Warning event; nothing moves.
func TestIncrementalWithoutGatewayAPI(t *testing.T) {
	w := newWorld(service(stepwise(50, 25, 10)))
	w.gate, w.clusterSvcs = true, map[string]*corev1.Service{}
	w.step(t) // names the first cluster
	o := w.observed()
	o.GatewayErr = fmt.Errorf("no matches for kind \"Gateway\"")
	d := Next(o)
	if has(d, SyncGateway) != nil || len(d.Events) == 0 || d.Events[0].Reason != EventFailedToCreateGateway || !strings.Contains(d.Events[0].Message, "no matches for kind") {
		t.Errorf("actions %v, events %+v; want a FailedToCreateGateway Warning and no Gateway write", kinds(d), d.Events)
	}
}

// The cluster an incremental upgrade moves away from keeps the serveConfigV2 it runs at every capacity step:
// no put on it carries the spec's new config. Recorded (as kray records every put), it is put with its own
// config until its capacity is 0; unknown (its record lost, or made by a kray that kept it in memory and
// restarted), its capacity is left as it is, with a Warning that says why.
func TestIncrementalLeavingClusterKeepsItsConfig(t *testing.T) {
	for _, recorded := range []bool{true, false} {
		t.Run(fmt.Sprintf("recorded=%v", recorded), func(t *testing.T) {
			w, old := incrementalWorld(t, 50, 25, 10)
			oldConfig := w.svc.Spec.ServeConfigV2
			w.svc.Spec.ServeConfigV2 = oldConfig + "  - name: veg\n    import_path: veg:app\n"
			w.svc.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
			w.svc.Generation++
			var puts []Action
			warned := false
			for i := 0; i < 60 && w.svc.Status.ActiveServiceStatus.RayClusterName == old; i++ {
				if !recorded {
					delete(w.applied, old)
				}
				d := w.step(t)
				for _, a := range d.Actions {
					if a.Kind == ApplyServe && a.Name == old {
						puts = append(puts, a)
					}
				}
				for _, e := range d.Events {
					warned = warned || (e.Reason == EventFailedToUpdateTargetCapacity && strings.Contains(e.Message, old))
				}
				w.settle(d)
				w.now = w.now.Add(5 * time.Second)
			}
			for _, a := range puts {
				if a.Config != oldConfig {
					t.Errorf("put on the cluster the upgrade leaves at capacity %v with another config:\n%s", ptr.Deref(a.Capacity, -1), a.Config)
				}
			}
			if recorded && (len(puts) == 0 || w.svc.Status.ActiveServiceStatus.RayClusterName == old) {
				t.Errorf("%d puts on %s, active %s: want its capacity lowered with its own config and the upgrade done", len(puts), old, w.svc.Status.ActiveServiceStatus.RayClusterName)
			}
			if !recorded && (len(puts) != 0 || !warned) {
				t.Errorf("%d puts on %s, warned %v: want none, and a Warning", len(puts), old, warned)
			}
		})
	}
}

// withoutProxyAtZero labels the pending cluster's workers as Serve would leave them: a worker runs a Serve
// proxy (and so serves) only where replicas run, and at target capacity 0 none does.
func (w *world) withoutProxyAtZero() {
	p := w.svc.Status.PendingServiceStatus
	for i := range w.pods {
		pod := &w.pods[i]
		if p.RayClusterName == "" || pod.Labels[constants.LabelCluster] != p.RayClusterName || pod.Labels[constants.LabelNodeType] != constants.NodeTypeWorker {
			continue
		}
		pod.Labels[constants.LabelServe] = fmt.Sprint(percentOr(p.TargetCapacity, 0) > 0)
	}
}

// With excludeHeadPodFromServeSvc, a pending cluster at target capacity 0 has no serve endpoint (no replica,
// so no proxy on its workers, and its head is left out): its first capacity step needs none, and the
// upgrade ends on the new cluster.
func TestIncrementalUpgradeWithHeadExcludedFromServe(t *testing.T) {
	w, old := incrementalWorld(t, 50, 50, 1)
	w.svc.Spec.ExcludeHeadPodFromServeSvc = true
	w.svc.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
	for i := 0; i < 100 && w.svc.Status.ActiveServiceStatus.RayClusterName == old; i++ {
		w.settle(w.step(t))
		w.withoutProxyAtZero()
		w.now = w.now.Add(5 * time.Second)
	}
	if got := w.svc.Status.ActiveServiceStatus.RayClusterName; got == old {
		t.Fatalf("still on %s: %+v", old, w.svc.Status.PendingServiceStatus)
	}
}

// A route that no longer names a cluster mid-upgrade (recreated by someone, or written by a promotion whose
// status write was lost) keeps the weights the status holds: traffic never jumps to a cluster whose capacity
// was not raised for it.
func TestIncrementalRouteWithoutClusterKeepsWeights(t *testing.T) {
	t.Run("route recreated", func(t *testing.T) {
		w, old := incrementalWorld(t, 50, 25, 1)
		w.svc.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
		w.upgradeUntil(t, func() bool {
			_, pw, _, _ := routeWeights(w.route, old, w.svc.Status.PendingServiceStatus.RayClusterName)
			return pw == 25
		})
		pending := w.svc.Status.PendingServiceStatus.RayClusterName
		w.route = nil
		w.settle(w.step(t))
		if aw, pw, _, _ := routeWeights(w.route, old, pending); aw != 75 || pw != 25 {
			t.Errorf("route made again with weights %d/%d, want the status's 75/25", aw, pw)
		}
	})
	t.Run("promotion's status write lost", func(t *testing.T) {
		w, old := incrementalWorld(t, 50, 50, 1)
		w.svc.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
		var before *rayv1.RayService
		w.upgradeUntil(t, func() bool {
			if w.svc.Status.ActiveServiceStatus.RayClusterName != old {
				return true
			}
			before = w.svc.DeepCopy()
			return false
		})
		w.svc = before                                                             // the promotion's route was written, its status was not
		w.serve[old] = ServeRead{Err: fmt.Errorf("the dashboard does not answer")} // so the promotion waits
		d := w.step(t)
		w.settle(d)
		if aw, _, hasA, _ := routeWeights(w.route, old, ""); hasA && aw != 0 {
			t.Errorf("after a lost promotion the route gives %d%% back to the old cluster at capacity %d", aw, percentOr(before.Status.ActiveServiceStatus.TargetCapacity, 100))
		}
	})
}

// Capacity covers traffic on Serve, not only in the status: while the losing cluster's Serve has not taken a
// capacity cut (its PUT fails), the gaining cluster is not raised, so the capacities Serve runs never add up
// to more than 100 + maxSurgePercent, and each cluster's capacity covers its weight at every step.
func TestIncrementalCapacityCoversTrafficOnServe(t *testing.T) {
	for _, rollback := range []bool{false, true} {
		t.Run(fmt.Sprintf("rollback=%v", rollback), func(t *testing.T) {
			const surge = 50
			w, old := incrementalWorld(t, surge, 25, 1)
			w.svc.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
			if rollback {
				w.upgradeUntil(t, func() bool {
					_, pw, _, _ := routeWeights(w.route, old, w.svc.Status.PendingServiceStatus.RayClusterName)
					return pw == 50
				})
				w.svc.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.46.0"
			}
			failed, steps := 0, 0
			done := func() bool {
				if rollback {
					return w.svc.Status.PendingServiceStatus.RayClusterName == ""
				}
				return w.svc.Status.ActiveServiceStatus.RayClusterName != old && w.svc.Status.PendingServiceStatus.RayClusterName == ""
			}
			for i := 0; i < 200 && !done(); i++ {
				steps++
				d := w.step(t)
				st := w.svc.Status
				var kept []Action
				for _, a := range d.Actions {
					// Every cut of a capacity fails on Serve three times before it is taken.
					if a.Kind == ApplyServe && a.Capacity != nil && w.serve[a.Name].Details != nil && w.serve[a.Name].Details.TargetCapacity != nil &&
						float64(*a.Capacity) < *w.serve[a.Name].Details.TargetCapacity && failed < 3 {
						failed++
						continue
					}
					if a.Kind == ApplyServe {
						failed = 0
					}
					kept = append(kept, a)
				}
				d.Actions = kept
				w.settle(d)
				var sum float64
				for _, name := range []string{st.ActiveServiceStatus.RayClusterName, st.PendingServiceStatus.RayClusterName} {
					if r := w.serve[name]; r.Details != nil && r.Details.TargetCapacity != nil {
						sum += *r.Details.TargetCapacity
					}
				}
				if sum > 100+surge {
					t.Fatalf("step %d: Serve runs capacities adding up to %.0f%%", i, sum)
				}
				aw, pw, _, _ := routeWeights(w.route, st.ActiveServiceStatus.RayClusterName, st.PendingServiceStatus.RayClusterName)
				for _, c := range []struct {
					name   string
					weight int32
				}{{st.ActiveServiceStatus.RayClusterName, aw}, {st.PendingServiceStatus.RayClusterName, pw}} {
					if r := w.serve[c.name]; r.Details != nil && r.Details.TargetCapacity != nil && *r.Details.TargetCapacity < float64(c.weight) {
						t.Fatalf("step %d: %s carries %d%% of the traffic at capacity %.0f%% on Serve", i, c.name, c.weight, *r.Details.TargetCapacity)
					}
				}
				w.now = w.now.Add(5 * time.Second)
			}
			if !done() || steps < 5 {
				t.Fatalf("not done after %d steps: %+v", steps, w.svc.Status)
			}
		})
	}
}

// Every surge and step size, with a rollback begun at every point of the upgrade: each cluster's capacity in
// the status covers the traffic the route gives it, at every step.
func TestIncrementalRollbackSweepKeepsCapacityOverTraffic(t *testing.T) {
	for _, surge := range []int32{20, 25, 30, 50, 100} {
		for _, stepSize := range []int32{10, 20, 25, 30, 50, 100} {
			if stepSize > surge {
				continue // refused: stepSizePercent must not exceed maxSurgePercent
			}
			for at := 1; at < 40; at++ {
				w, old := incrementalWorld(t, surge, stepSize, 1)
				w.svc.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
				check := func(when string) {
					st := w.svc.Status
					aw, pw, _, hasP := routeWeights(w.route, st.ActiveServiceStatus.RayClusterName, st.PendingServiceStatus.RayClusterName)
					if ac := percentOr(st.ActiveServiceStatus.TargetCapacity, 100); ac < aw {
						t.Fatalf("surge %d step %d rollback at %d, %s: active capacity %d under its weight %d", surge, stepSize, at, when, ac, aw)
					}
					if pc := percentOr(st.PendingServiceStatus.TargetCapacity, 0); hasP && pc < pw {
						t.Fatalf("surge %d step %d rollback at %d, %s: pending capacity %d under its weight %d", surge, stepSize, at, when, pc, pw)
					}
				}
				i := 0
				for ; i < at && w.svc.Status.ActiveServiceStatus.RayClusterName == old; i++ {
					w.settle(w.step(t))
					check("forward")
					w.now = w.now.Add(5 * time.Second)
				}
				if w.svc.Status.ActiveServiceStatus.RayClusterName != old {
					break // promoted before this point: nothing left to roll back
				}
				w.svc.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.46.0"
				for j := 0; j < 200 && w.svc.Status.PendingServiceStatus.RayClusterName != ""; j++ {
					w.settle(w.step(t))
					check("back")
					w.now = w.now.Add(5 * time.Second)
				}
			}
		}
	}
}

// A spec that goes back to the active cluster's after an upgrade that removed its last worker group rolls
// back: the pending cluster's spec plus that group reads as "groups appended", but the spec is the active
// cluster's, so nothing is added to the pending cluster and the active one keeps the RayService.
func TestIncrementalRevertAfterRemovingAGroupRollsBack(t *testing.T) {
	w := newWorld(service(stepwise(50, 25, 1), func(s *rayv1.RayService) {
		g := s.Spec.RayClusterSpec.WorkerGroupSpecs[0]
		g.GroupName = "large"
		s.Spec.RayClusterSpec.WorkerGroupSpecs = append(s.Spec.RayClusterSpec.WorkerGroupSpecs, *g.DeepCopy())
	}))
	w.gate, w.clusterSvcs = true, map[string]*corev1.Service{}
	w.upgradeUntil(t, func() bool { return w.route != nil && w.svc.Status.ActiveServiceStatus.RayClusterName != "" })
	old := w.svc.Status.ActiveServiceStatus.RayClusterName
	groups := w.svc.Spec.RayClusterSpec.WorkerGroupSpecs
	w.svc.Spec.RayClusterSpec.WorkerGroupSpecs = groups[:1]
	w.upgradeUntil(t, func() bool {
		_, pw, _, _ := routeWeights(w.route, old, w.svc.Status.PendingServiceStatus.RayClusterName)
		return pw == 25
	})
	pending := w.svc.Status.PendingServiceStatus.RayClusterName
	w.svc.Spec.RayClusterSpec.WorkerGroupSpecs = groups // back
	d := w.step(t)
	if c := condition(w.svc.Status, rayv1.RollbackInProgress); c == nil || c.Status != metav1.ConditionTrue || c.Message != msgRollbackReverted {
		t.Fatalf("RollbackInProgress %+v, actions %v", c, kinds(d))
	}
	for _, a := range d.Actions {
		if a.Kind == UpdateCluster && a.Name == pending {
			t.Errorf("the pending cluster %s was updated in place towards the active cluster's spec", pending)
		}
	}
	w.settle(d)
	w.upgradeUntil(t, func() bool { return w.svc.Status.PendingServiceStatus.RayClusterName == "" })
	if got := w.svc.Status.ActiveServiceStatus.RayClusterName; got != old {
		t.Errorf("active %s after the revert, want %s", got, old)
	}
}
