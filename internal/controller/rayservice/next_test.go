package rayservice

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/dashboard"
	"github.com/kray-project/kray/pkg/spec"
	"github.com/kray-project/kray/pkg/validation"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

const serveConfig = "applications:\n  - name: fruit\n    import_path: fruit:app\n"

// service is a valid RayService with one worker group.
func service(mutate ...func(*rayv1.RayService)) *rayv1.RayService {
	svc := &rayv1.RayService{
		ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns", UID: "svc-uid", Generation: 1, CreationTimestamp: metav1.NewTime(t0)},
		Spec: rayv1.RayServiceSpec{
			ServeConfigV2: serveConfig,
			RayClusterSpec: rayv1.RayClusterSpec{
				HeadGroupSpec: rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "ray-head", Image: "rayproject/ray:2.46.0",
					Ports: []corev1.ContainerPort{{Name: "dashboard", ContainerPort: 8265}, {Name: "serve", ContainerPort: 8000}},
				}}}}},
				WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: "small", Replicas: ptr.To[int32](1), MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](5),
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-worker", Image: "rayproject/ray:2.46.0"}}}}}},
			},
		},
	}
	for _, m := range mutate {
		m(svc)
	}
	return svc
}

// world is what a test observes: the RayService and its clusters, pods, Services and Serve answers.
type world struct {
	svc      *rayv1.RayService
	clusters map[string]*rayv1.RayCluster
	pods     []corev1.Pod
	serve    map[string]ServeRead
	healthy  map[string]bool
	proxyErr map[string]error
	head     *corev1.Service
	serveSvc *corev1.Service
	applied  map[string]Served
	now      time.Time
	names    int
	// gate is the RayServiceIncrementalUpgrade gate; gateway, route and clusterSvcs the objects of an
	// incremental upgrade.
	gate        bool
	failures    int
	gateway     *gwv1.Gateway
	route       *gwv1.HTTPRoute
	clusterSvcs map[string]*corev1.Service
}

func newWorld(svc *rayv1.RayService) *world {
	return &world{svc: svc, clusters: map[string]*rayv1.RayCluster{}, serve: map[string]ServeRead{}, healthy: map[string]bool{}, proxyErr: map[string]error{}, applied: map[string]Served{}, now: t0}
}

func (w *world) observed() Observed {
	w.names++
	return Observed{Service: w.svc, Clusters: w.clusters, Pods: w.pods, Serve: w.serve, ProxyHealthy: w.healthy, ProxyErr: w.proxyErr,
		HeadService: w.head, ServeService: w.serveSvc, Applied: w.applied, Now: w.now, Suffix: fmt.Sprintf("n%04d", w.names), ZeroDowntime: true, ServeFailures: w.failures,
		Gateway: w.gateway, HTTPRoute: w.route, ClusterServeServices: w.clusterSvcs, Validation: validation.RayServiceOptions{IncrementalUpgrade: w.gate}}
}

// step runs Next and stores its status, as a successful status write would.
func (w *world) step(t *testing.T) Decision {
	t.Helper()
	d := Next(w.observed())
	w.svc = w.svc.DeepCopy()
	w.svc.Status = d.Status
	return d
}

// addCluster makes the cluster named name exist, built from the current spec, with a ready head and one
// ready worker.
func (w *world) addCluster(name string) *rayv1.RayCluster {
	rc := Cluster(w.svc, name)
	rc.UID = types.UID(name + "-uid")
	w.clusters[name] = rc
	w.pods = append(w.pods, pod(name, constants.NodeTypeHead, "false"), pod(name, constants.NodeTypeWorker, "true"))
	return rc
}

func pod(cluster, nodeType, serve string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + "-" + nodeType, Namespace: "ns",
			Labels: map[string]string{constants.LabelCluster: cluster, constants.LabelNodeType: nodeType, constants.LabelServe: serve}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "ray"}}},
		Status: corev1.PodStatus{PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// running makes cluster's Serve report every application RUNNING, with the current config applied.
func (w *world) running(cluster string) {
	w.serve[cluster] = ServeRead{Details: &dashboard.ServeDetails{Applications: map[string]dashboard.ServeApplication{"fruit": {Status: "RUNNING"}}}}
	w.applied[cluster] = Served{Config: w.svc.Spec.ServeConfigV2}
}

// apply makes the live Services what a SyncService action of d would leave.
func (w *world) apply(d Decision) {
	for _, a := range d.Actions {
		if a.Kind != SyncService {
			continue
		}
		if a.Service.Name == HeadServiceName(w.svc) {
			w.head = a.Service
		} else {
			w.serveSvc = a.Service
		}
	}
}

func kinds(d Decision) []string {
	var out []string
	for _, a := range d.Actions {
		out = append(out, string(a.Kind)+" "+a.Name)
	}
	return out
}

func has(d Decision, kind ActionKind) *Action {
	for i := range d.Actions {
		if d.Actions[i].Kind == kind {
			return &d.Actions[i]
		}
	}
	return nil
}

func condition(st rayv1.RayServiceStatuses, t rayv1.RayServiceConditionType) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, string(t))
}

// A new RayService names its first cluster in the status, and creates it only once that name is stored;
// the cluster serves once Serve runs its applications, the Services follow, and then it becomes active.
func TestFirstCluster(t *testing.T) {
	w := newWorld(service())
	d := w.step(t)
	name := d.Status.PendingServiceStatus.RayClusterName
	if name != "svc-n0001" || len(d.Actions) != 0 {
		t.Fatalf("first step: pending %q, actions %v; want a name and nothing created", name, kinds(d))
	}
	if c := condition(d.Status, rayv1.RayServiceReady); c == nil || c.Reason != string(rayv1.RayServiceInitializing) {
		t.Errorf("Ready = %+v, want Initializing", c)
	}
	d = w.step(t)
	if a := has(d, CreateCluster); a == nil || a.Name != name || a.Cluster.Annotations[constants.AnnotationClusterHash] != ClusterHash(&w.svc.Spec.RayClusterSpec) {
		t.Fatalf("second step: %v, want the named cluster created with its hash", kinds(d))
	}
	w.addCluster(name)
	w.serve[name] = ServeRead{Details: &dashboard.ServeDetails{}}
	d = w.step(t)
	if a := has(d, ApplyServe); a == nil || a.Name != name || a.Config != serveConfig {
		t.Fatalf("head ready, no applications: %v, want the config applied", kinds(d))
	}
	if has(d, SyncService) != nil {
		t.Errorf("Services made before the applications run: %v", kinds(d))
	}
	w.applied[name] = Served{Config: serveConfig}
	w.serve[name] = ServeRead{Details: &dashboard.ServeDetails{Applications: map[string]dashboard.ServeApplication{"fruit": {Status: "DEPLOYING"}}}}
	d = w.step(t)
	if len(d.Actions) != 0 || d.Status.PendingServiceStatus.Applications["fruit"].Status != "DEPLOYING" {
		t.Fatalf("deploying: %v, applications %+v", kinds(d), d.Status.PendingServiceStatus.Applications)
	}
	w.running(name)
	d = w.step(t)
	if got := kinds(d); len(got) != 2 || has(d, SyncService) == nil {
		t.Fatalf("running: %v, want both Services created", got)
	}
	w.apply(d)
	d = w.step(t)
	if d.Status.ActiveServiceStatus.RayClusterName != name || d.Status.PendingServiceStatus.RayClusterName != "" {
		t.Fatalf("Services on the cluster: active %q pending %q, want it promoted", d.Status.ActiveServiceStatus.RayClusterName, d.Status.PendingServiceStatus.RayClusterName)
	}
	if c := condition(d.Status, rayv1.RayServiceReady); c.Status != metav1.ConditionTrue || d.Status.NumServeEndpoints != 1 || d.Status.ServiceStatus != rayv1.Running {
		t.Errorf("Ready %+v, endpoints %d, serviceStatus %q", c, d.Status.NumServeEndpoints, d.Status.ServiceStatus)
	}
	if c := condition(d.Status, rayv1.UpgradeInProgress); c.Status != metav1.ConditionFalse || c.Reason != string(rayv1.NoPendingCluster) {
		t.Errorf("UpgradeInProgress %+v", c)
	}
	if d = w.step(t); len(d.Actions) != 0 {
		t.Errorf("settled: %v, want no write", kinds(d))
	}
}

// serving is a world whose RayService serves from one active cluster, with both Services on it.
func serving(t *testing.T, mutate ...func(*rayv1.RayService)) (*world, string) {
	t.Helper()
	w := newWorld(service(mutate...))
	w.step(t)
	name := w.svc.Status.PendingServiceStatus.RayClusterName
	w.addCluster(name)
	w.running(name)
	w.apply(w.step(t))
	w.step(t)
	if w.svc.Status.ActiveServiceStatus.RayClusterName != name {
		t.Fatalf("setup: not serving from %s: %+v", name, w.svc.Status)
	}
	return w, name
}

// How a spec change reaches the clusters: replica fields alone change nothing, appended worker groups
// update the cluster in place, anything else prepares a new cluster (unless upgradeStrategy None).
func TestSpecChanges(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy *rayv1.RayServiceUpgradeType
		edit     func(*rayv1.RayClusterSpec)
		want     string // "", "update" or "new"
	}{
		{"replicas", nil, func(s *rayv1.RayClusterSpec) { s.WorkerGroupSpecs[0].Replicas = ptr.To[int32](3) }, ""},
		{"min and max", nil, func(s *rayv1.RayClusterSpec) { s.WorkerGroupSpecs[0].MaxReplicas = ptr.To[int32](9) }, ""},
		{"workersToDelete", nil, func(s *rayv1.RayClusterSpec) { s.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete = []string{"x"} }, ""},
		{"group appended", nil, func(s *rayv1.RayClusterSpec) {
			g := s.WorkerGroupSpecs[0].DeepCopy()
			g.GroupName = "big"
			s.WorkerGroupSpecs = append(s.WorkerGroupSpecs, *g)
		}, "update"},
		{"image", nil, func(s *rayv1.RayClusterSpec) {
			s.HeadGroupSpec.Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
		}, "new"},
		{"group removed", nil, func(s *rayv1.RayClusterSpec) { s.WorkerGroupSpecs = nil }, "new"},
		{"image, NewCluster", ptr.To(rayv1.RayServiceNewCluster), func(s *rayv1.RayClusterSpec) { s.RayVersion = "2.47.0" }, "new"},
		{"image, None", ptr.To(rayv1.RayServiceUpgradeNone), func(s *rayv1.RayClusterSpec) { s.RayVersion = "2.47.0" }, ""},
		{"image, incremental (not served)", ptr.To(rayv1.RayServiceNewClusterWithIncrementalUpgrade), func(s *rayv1.RayClusterSpec) { s.RayVersion = "2.47.0" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, active := serving(t, func(s *rayv1.RayService) {
				if tc.strategy != nil {
					s.Spec.UpgradeStrategy = &rayv1.RayServiceUpgradeStrategy{Type: tc.strategy}
				}
			})
			w.svc = w.svc.DeepCopy()
			tc.edit(&w.svc.Spec.RayClusterSpec)
			d := w.step(t)
			pending := d.Status.PendingServiceStatus.RayClusterName
			switch tc.want {
			case "":
				if len(d.Actions) != 0 || pending != "" {
					t.Errorf("actions %v, pending %q; want nothing", kinds(d), pending)
				}
			case "update":
				if a := has(d, UpdateCluster); a == nil || a.Name != active || len(a.Cluster.Spec.WorkerGroupSpecs) != 2 || pending != "" {
					t.Errorf("actions %v, pending %q; want %s updated in place", kinds(d), pending, active)
				}
			case "new":
				if pending == "" || pending == active || has(d, CreateCluster) != nil {
					t.Errorf("actions %v, pending %q; want a new name stored before any create", kinds(d), pending)
				}
				if c := condition(d.Status, rayv1.UpgradeInProgress); c.Status != metav1.ConditionTrue {
					t.Errorf("UpgradeInProgress %+v", c)
				}
			}
		})
	}
}

// An upgrade: the pending cluster is created, gets the applications, and takes the Services only once its
// applications run and it has a ready serve endpoint; then the old cluster gets a deletion deadline and is
// deleted once it passed. The active cluster keeps serving throughout.
func TestUpgradeSwitchesOnlyToAServingCluster(t *testing.T) {
	w, old := serving(t)
	w.svc = w.svc.DeepCopy()
	w.svc.Spec.RayClusterSpec.RayVersion = "2.47.0"
	w.now = t0.Add(time.Minute)
	d := w.step(t)
	pending := d.Status.PendingServiceStatus.RayClusterName
	d = w.step(t)
	if a := has(d, CreateCluster); a == nil || a.Name != pending {
		t.Fatalf("%v, want %s created", kinds(d), pending)
	}
	w.addCluster(pending)
	// Its worker is not ready yet and Serve runs its applications: no endpoint, no switch.
	for i := range w.pods {
		if w.pods[i].Labels[constants.LabelCluster] == pending && w.pods[i].Labels[constants.LabelNodeType] == constants.NodeTypeWorker {
			w.pods[i].Status.Conditions[0].Status = corev1.ConditionFalse
		}
	}
	w.running(pending)
	d = w.step(t)
	if has(d, SyncService) != nil {
		t.Fatalf("switched to a cluster without a ready serve endpoint: %v", kinds(d))
	}
	if c := condition(d.Status, rayv1.UpgradeInProgress); !strings.Contains(c.Message, "ready serve endpoint") {
		t.Errorf("UpgradeInProgress message %q does not say what it waits for", c.Message)
	}
	if c := condition(d.Status, rayv1.RayServiceReady); c.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v while the old cluster serves", c)
	}
	for i := range w.pods {
		w.pods[i].Status.Conditions[0].Status = corev1.ConditionTrue
	}
	d = w.step(t)
	if a := has(d, SyncService); a == nil || a.Service.Spec.Selector[constants.LabelCluster] != pending {
		t.Fatalf("%v, want the Services pointed at %s", kinds(d), pending)
	}
	w.apply(d)
	d = w.step(t)
	if d.Status.ActiveServiceStatus.RayClusterName != pending || d.Status.PendingServiceStatus.RayClusterName != "" {
		t.Fatalf("after the switch: %+v", d.Status)
	}
	mark := has(d, MarkCluster)
	if mark == nil || mark.Name != old || !mark.Deadline.Equal(w.now.Add(DefaultDeletionDelay)) || has(d, DeleteCluster) != nil {
		t.Fatalf("%v, want %s given a deadline %s later", kinds(d), old, DefaultDeletionDelay)
	}
	w.clusters[old].Annotations[constants.AnnotationDeletionDeadline] = mark.Deadline.Format(time.RFC3339)
	w.now = mark.Deadline.Add(-time.Second)
	if d = w.step(t); has(d, DeleteCluster) != nil || d.RequeueAfter != time.Second {
		t.Fatalf("before the deadline: %v, requeue %v", kinds(d), d.RequeueAfter)
	}
	w.now = mark.Deadline
	if d = w.step(t); has(d, DeleteCluster) == nil {
		t.Fatalf("at the deadline: %v, want %s deleted", kinds(d), old)
	}
}

// The switch waits for what Serve says the pending cluster serves from, never for what the active cluster
// had: once the applications run, the Services move when every pod Serve runs a proxy on is a ready serve
// endpoint, or when the switch deadline stored on the pending cluster passed; never to a cluster without a
// ready serve endpoint.
func TestSwitchWaitsForEveryServeProxyUntilItsDeadline(t *testing.T) {
	type tc struct {
		name string
		// activeWorkers and pendingWorkers are the workers of each cluster; readyWorkers those of the pending
		// one that are ready serve endpoints, proxied those Serve runs a proxy on (-1 for none reported).
		activeWorkers, pendingWorkers, readyWorkers, proxied int
		// draining of the proxies are reported DRAINING: the last ones.
		draining   int
		headServes bool
		// past is how far past the stored switch deadline the reconcile is (0: no deadline stored yet).
		past     time.Duration
		switches bool
		waitMsg  string
	}
	for _, c := range []tc{
		{name: "Serve autoscaled the active cluster; the new one runs its minimum on one worker", activeWorkers: 8, pendingWorkers: 8, readyWorkers: 1, proxied: 1, headServes: true, switches: true},
		{name: "an edit lowered num_replicas: fewer proxies than workers", activeWorkers: 3, pendingWorkers: 3, readyWorkers: 2, proxied: 2, switches: true},
		{name: "Serve reports no proxies: every pod the serve Service selects counts", activeWorkers: 3, pendingWorkers: 3, readyWorkers: 1, proxied: -1,
			waitMsg: "a ready serve endpoint on each of the 3 pods Serve runs a proxy on (2 not ready), until 2026-01-01T12:01:30Z at the latest"},
		{name: "Serve reports no proxies, past the deadline", activeWorkers: 3, pendingWorkers: 3, readyWorkers: 1, proxied: -1, past: time.Second, switches: true},
		{name: "draining proxies take no traffic in", activeWorkers: 3, pendingWorkers: 3, readyWorkers: 2, proxied: 3, draining: 1, switches: true},
		{name: "a proxied pod not ready yet", activeWorkers: 3, pendingWorkers: 3, readyWorkers: 2, proxied: 3, headServes: true,
			waitMsg: "a ready serve endpoint on each of the 4 pods Serve runs a proxy on (1 not ready), until 2026-01-01T12:01:30Z at the latest"},
		{name: "a proxied pod not ready by the deadline", activeWorkers: 3, pendingWorkers: 3, readyWorkers: 2, proxied: 3, past: time.Second, switches: true},
		{name: "a proxied pod not ready, just before the deadline", activeWorkers: 3, pendingWorkers: 3, readyWorkers: 2, proxied: 3, past: -time.Second,
			waitMsg: "(1 not ready), until 2026-01-01T12:01:01Z at the latest"},
		{name: "no ready endpoint, long past the deadline", activeWorkers: 3, pendingWorkers: 3, readyWorkers: 0, proxied: 3, past: time.Hour,
			waitMsg: "for a ready serve endpoint on it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, old := serving(t, func(s *rayv1.RayService) {
				s.Spec.RayClusterSpec.WorkerGroupSpecs[0].Replicas = ptr.To(int32(c.activeWorkers))
				s.Spec.RayClusterSpec.WorkerGroupSpecs[0].MaxReplicas = ptr.To[int32](10)
			})
			for i := 1; i < c.activeWorkers; i++ {
				w.pods = append(w.pods, worker(old, i, true))
			}
			w.svc = w.svc.DeepCopy()
			w.svc.Spec.RayClusterSpec.RayVersion = "2.47.0"
			w.svc.Spec.RayClusterSpec.WorkerGroupSpecs[0].Replicas = ptr.To(int32(c.pendingWorkers))
			w.now = t0.Add(time.Minute)
			w.step(t)
			pending := w.svc.Status.PendingServiceStatus.RayClusterName
			w.step(t)
			rc := w.addCluster(pending)
			w.pods = w.pods[:len(w.pods)-1] // addCluster's ready worker: the workers come below
			for i := range w.pods {
				if p := &w.pods[i]; p.Name == pending+"-head" && c.headServes {
					p.Labels[constants.LabelServe] = "true"
				}
			}
			var proxied []string
			if c.headServes {
				proxied = append(proxied, pending+"-head")
			}
			for i := 0; i < c.pendingWorkers; i++ {
				p := worker(pending, i, i < c.readyWorkers)
				w.pods = append(w.pods, p)
				if i < c.proxied {
					proxied = append(proxied, p.Name)
				}
			}
			w.running(pending)
			if c.proxied >= 0 {
				w.proxies(pending, c.draining, proxied...)
			}
			if c.past != 0 {
				rc.Annotations[constants.AnnotationSwitchDeadline] = w.now.Add(-c.past).Format(time.RFC3339)
			}
			d := w.step(t)
			switched := has(d, SyncService) != nil
			msg := condition(d.Status, rayv1.UpgradeInProgress).Message
			if switched != c.switches {
				t.Fatalf("switched %v, want %v (%s)", switched, c.switches, msg)
			}
			if switched {
				return
			}
			mark := has(d, MarkSwitch)
			switch {
			case c.readyWorkers == 0 && c.past != 0:
				if mark == nil || !mark.Deadline.IsZero() {
					t.Errorf("%v: want the deadline of a wait that is not on cleared", kinds(d))
				}
			case c.past == 0 && c.readyWorkers > 0:
				if mark == nil || mark.Name != pending || !mark.Deadline.Equal(w.now.Add(SwitchWait)) || d.RequeueAfter > SwitchWait {
					t.Fatalf("%v, requeue %v: want the deadline %v stored on %s and a look by then", kinds(d), d.RequeueAfter, w.now.Add(SwitchWait), pending)
				}
				rc.Annotations[constants.AnnotationSwitchDeadline] = mark.Deadline.Format(time.RFC3339)
				d = w.step(t)
				if has(d, SyncService) != nil || has(d, MarkSwitch) != nil {
					t.Errorf("with the deadline stored: %v, want no switch and no write", kinds(d))
				}
				msg = condition(d.Status, rayv1.UpgradeInProgress).Message
			case mark != nil:
				t.Errorf("%v: the stored deadline written again", kinds(d))
			}
			if !strings.Contains(msg, c.waitMsg) {
				t.Errorf("UpgradeInProgress message %q, want it to say %q", msg, c.waitMsg)
			}
		})
	}
}

// The switch deadline is the pending cluster's: once it serves, the deadline goes with the next reconcile.
func TestSwitchDeadlineGoesOnceTheClusterServes(t *testing.T) {
	w, old := serving(t)
	pending, rc := w.upgrade(t)
	w.running(pending)
	rc.Annotations[constants.AnnotationSwitchDeadline] = t0.Format(time.RFC3339)
	w.apply(w.step(t))
	w.step(t)
	if w.svc.Status.ActiveServiceStatus.RayClusterName != pending {
		t.Fatalf("not switched from %s to %s: %+v", old, pending, w.svc.Status)
	}
	d := w.step(t)
	if a := has(d, MarkSwitch); a == nil || a.Name != pending || !a.Deadline.IsZero() {
		t.Errorf("%v, want the switch deadline of %s cleared", kinds(d), pending)
	}
}

// A deadline bounds one wait: once the applications stop running, it goes, and the next wait has its own.
// A switch once made holds: both Services stay on the new cluster while it is promoted, even if one of its
// proxied pods turns unready meanwhile.
func TestSwitchDeadlineBoundsOneWaitAndTheSwitchHolds(t *testing.T) {
	w, _ := serving(t)
	pending, rc := w.upgrade(t)
	unready := worker(pending, 1, false)
	w.pods = append(w.pods, unready)
	w.running(pending)
	w.proxies(pending, 0, pending+"-worker", unready.Name)
	rc.Annotations[constants.AnnotationSwitchDeadline] = t0.Add(time.Hour).Format(time.RFC3339)
	w.serve[pending] = ServeRead{Details: &dashboard.ServeDetails{Applications: map[string]dashboard.ServeApplication{"fruit": {Status: "DEPLOYING"}}}}
	d := w.step(t)
	if a := has(d, MarkSwitch); a == nil || a.Name != pending || !a.Deadline.IsZero() || has(d, SyncService) != nil {
		t.Fatalf("applications no longer running: %v, want the deadline of %s cleared and no switch", kinds(d), pending)
	}
	delete(rc.Annotations, constants.AnnotationSwitchDeadline)

	w.running(pending)
	w.proxies(pending, 0, pending+"-worker", unready.Name)
	w.pods[len(w.pods)-1].Status.Conditions[0].Status = corev1.ConditionTrue
	d = w.step(t)
	if has(d, SyncService) == nil {
		t.Fatalf("every proxied pod ready: %v, want the switch", kinds(d))
	}
	w.apply(d)
	w.pods[len(w.pods)-1].Status.Conditions[0].Status = corev1.ConditionFalse
	d = w.step(t)
	if has(d, SyncService) != nil || d.Status.ActiveServiceStatus.RayClusterName != pending {
		t.Fatalf("after the switch, a proxied pod unready: %v, active %s: want the Services kept on %s and it promoted",
			kinds(d), d.Status.ActiveServiceStatus.RayClusterName, pending)
	}
}

// A proxy whose instance ID names no pod of the cluster (a Ray that reports another) is matched by its IP.
func TestSwitchMatchesAProxyByIPWhenItsInstanceIDNamesNoPod(t *testing.T) {
	w, _ := serving(t)
	pending, _ := w.upgrade(t)
	unready := worker(pending, 1, false)
	unready.Status.PodIP = "10.0.9.9"
	w.pods = append(w.pods, unready)
	w.running(pending)
	w.serve[pending].Details.Proxies = map[string]dashboard.ServeProxy{"n": {NodeID: "n", NodeIP: "10.0.9.9", NodeInstanceID: "i-0123", Status: dashboard.ProxyHealthy}}
	if d := w.step(t); has(d, SyncService) != nil || has(d, MarkSwitch) == nil {
		t.Fatalf("%v: want a wait for the pod at the proxy's IP", kinds(d))
	}
}

// upgrade changes the serving world's Ray version and returns the pending cluster it prepares, made to
// exist as addCluster makes it.
func (w *world) upgrade(t *testing.T) (string, *rayv1.RayCluster) {
	t.Helper()
	w.svc = w.svc.DeepCopy()
	w.svc.Spec.RayClusterSpec.RayVersion = "2.47.0"
	w.step(t)
	pending := w.svc.Status.PendingServiceStatus.RayClusterName
	w.step(t)
	return pending, w.addCluster(pending)
}

// proxies makes cluster's Serve report a proxy on each of the pods named, HEALTHY but for the last draining
// ones, DRAINING.
func (w *world) proxies(cluster string, draining int, pods ...string) {
	read := w.serve[cluster]
	details := *read.Details
	details.Proxies = map[string]dashboard.ServeProxy{}
	for i, name := range pods {
		status := dashboard.ProxyHealthy
		if i >= len(pods)-draining {
			status = dashboard.ProxyDraining
		}
		details.Proxies[fmt.Sprintf("node-%d", i)] = dashboard.ServeProxy{NodeID: fmt.Sprintf("node-%d", i), NodeIP: "10.0.0.1", NodeInstanceID: name, Status: status}
	}
	read.Details = &details
	w.serve[cluster] = read
}

// worker is the i-th worker pod of cluster, a serve endpoint when ready.
func worker(cluster string, i int, ready bool) corev1.Pod {
	p := pod(cluster, constants.NodeTypeWorker, "true")
	p.Name = fmt.Sprintf("%s-%d", p.Name, i)
	if !ready {
		p.Status.Conditions[0].Status = corev1.ConditionFalse
	}
	return p
}

// A change during an upgrade replaces the pending cluster with a new one; the replaced one goes like any
// cluster that no longer serves.
func TestChangeDuringUpgradeReplacesThePendingCluster(t *testing.T) {
	w, _ := serving(t)
	w.svc = w.svc.DeepCopy()
	w.svc.Spec.RayClusterSpec.RayVersion = "2.47.0"
	w.step(t)
	first := w.svc.Status.PendingServiceStatus.RayClusterName
	w.step(t)
	w.addCluster(first)
	w.svc = w.svc.DeepCopy()
	w.svc.Spec.RayClusterSpec.RayVersion = "2.48.0"
	w.now = w.now.Add(time.Second)
	d := w.step(t)
	second := d.Status.PendingServiceStatus.RayClusterName
	if second == first || second == "" || has(d, CreateCluster) != nil {
		t.Fatalf("pending %q (was %q), actions %v", second, first, kinds(d))
	}
	if a := has(d, MarkCluster); a == nil || a.Name != first {
		t.Errorf("%v, want the replaced pending cluster %s marked", kinds(d), first)
	}
}

// A head restarted without GCS fault tolerance shows no application: the config is applied again, though
// the cluster had accepted it.
func TestEmptiedServeIsAppliedAgain(t *testing.T) {
	w, name := serving(t)
	w.serve[name] = ServeRead{Details: &dashboard.ServeDetails{}}
	if a := has(w.step(t), ApplyServe); a == nil || a.Name != name {
		t.Fatal("no ApplyServe for a cluster whose Serve lost its applications")
	}
	w.running(name)
	w.svc = w.svc.DeepCopy()
	w.svc.Spec.ServeConfigV2 = serveConfig + "  - name: math\n    import_path: math:app\n"
	if a := has(w.step(t), ApplyServe); a == nil || !strings.Contains(a.Config, "math") {
		t.Fatal("a serve-only edit is not applied to the active cluster")
	}
	if w.svc.Status.PendingServiceStatus.RayClusterName != "" {
		t.Errorf("a serve-only edit prepared a cluster")
	}
}

// The head's ray.io/serve label follows its Serve proxy's health; with excludeHeadPodFromServeSvc it stays
// "false".
func TestHeadServeLabel(t *testing.T) {
	w, name := serving(t)
	head := name + "-head"
	w.healthy[head] = true
	a := has(w.step(t), LabelHead)
	if a == nil || a.Pod.Name != head || a.Value != "true" {
		t.Fatalf("healthy proxy: %+v", a)
	}
	for i := range w.pods {
		if w.pods[i].Name == head {
			w.pods[i].Labels[constants.LabelServe] = "true"
		}
	}
	w.healthy[head] = false
	w.proxyErr[head] = errors.New("Serve proxy health check at http://10.0.0.1:8000: the Serve proxy answered 503 Service Unavailable: draining")
	a = has(w.step(t), LabelHead)
	if a == nil || a.Value != "false" || !strings.Contains(a.Why, "503 Service Unavailable: draining") {
		t.Fatalf("failing proxy: %+v, want the label false saying why", a)
	}
	for i := range w.pods {
		if w.pods[i].Name == head {
			w.pods[i].Labels[constants.LabelServe] = "false"
		}
	}
	w.svc = w.svc.DeepCopy()
	w.svc.Spec.ExcludeHeadPodFromServeSvc = true
	if a := has(w.step(t), LabelHead); a != nil {
		t.Errorf("excluded head labelled %+v while its label is already false", a)
	}
	if got := ProbedHeads(w.svc, w.pods); len(got) != 0 {
		t.Errorf("excluded head probed")
	}
}

// A RayService that never serves within ray.io/initializing-timeout fails for good and lets its clusters go.
func TestInitializingTimeout(t *testing.T) {
	w := newWorld(service(func(s *rayv1.RayService) {
		s.Annotations = map[string]string{constants.AnnotationInitializingTimeout: "5m"}
	}))
	w.step(t)
	name := w.svc.Status.PendingServiceStatus.RayClusterName
	w.step(t)
	w.addCluster(name)
	w.now = t0.Add(4 * time.Minute)
	if d := w.step(t); d.RequeueAfter > time.Minute || condition(d.Status, rayv1.RayServiceReady).Reason != string(rayv1.RayServiceInitializing) {
		t.Fatalf("before the timeout: %+v", d.Status.Conditions)
	}
	w.now = t0.Add(5 * time.Minute)
	d := w.step(t)
	if c := condition(d.Status, rayv1.RayServiceReady); c.Reason != string(rayv1.RayServiceInitializingTimeout) || d.Status.PendingServiceStatus.RayClusterName != "" {
		t.Fatalf("at the timeout: Ready %+v, pending %q", c, d.Status.PendingServiceStatus.RayClusterName)
	}
	if len(d.Events) != 1 || d.Events[0].Reason != EventRayServiceInitializingTimeout {
		t.Errorf("events %+v", d.Events)
	}
	if a := has(d, MarkCluster); a == nil || a.Name != name {
		t.Errorf("%v, want %s let go", kinds(d), name)
	}
	if d = w.step(t); d.Status.PendingServiceStatus.RayClusterName != "" || has(d, CreateCluster) != nil {
		t.Errorf("after failing: %v, pending %q; want it to stay failed", kinds(d), d.Status.PendingServiceStatus.RayClusterName)
	}
}

// An invalid spec is refused with KubeRay's event and nothing else.
func TestInvalidSpec(t *testing.T) {
	w := newWorld(service(func(s *rayv1.RayService) { s.Spec.RayClusterDeletionDelaySeconds = ptr.To[int32](-1) }))
	d := w.step(t)
	if !d.Invalid || len(d.Actions) != 0 || len(d.Events) != 1 || d.Events[0].Reason != EventInvalidRayServiceSpec ||
		d.Events[0].Message != "The RayService spec is invalid ns/svc: Spec.RayClusterDeletionDelaySeconds should be a non-negative integer, got -1" {
		t.Errorf("decision %+v", d)
	}
	if c := condition(d.Status, rayv1.RayServiceReady); c.Status != metav1.ConditionFalse || c.Reason != string(rayv1.RayServiceValidationFailed) || c.Message != d.Events[0].Message {
		t.Errorf("Ready %+v, want False/ValidationFailed with the event's message", c)
	}
}

// A cluster the status still names but that is gone is replaced by a new one.
func TestLostActiveClusterIsReplaced(t *testing.T) {
	w, name := serving(t)
	delete(w.clusters, name)
	d := w.step(t)
	if p := d.Status.PendingServiceStatus.RayClusterName; p == "" || p == name || d.Status.ActiveServiceStatus.RayClusterName != "" {
		t.Errorf("status %+v", d.Status)
	}
}

// A cluster KubeRay made (another hash scheme) is rebuilt in place once, never replaced.
func TestTakenOverClusterIsRebuiltInPlace(t *testing.T) {
	w, name := serving(t)
	w.clusters[name].Annotations[constants.AnnotationKubeRayVersion] = "v1.5.0"
	w.clusters[name].Annotations[constants.AnnotationClusterHash] = "KUBERAYSHASH"
	d := w.step(t)
	if a := has(d, UpdateCluster); a == nil || a.Cluster.Annotations[constants.AnnotationKubeRayVersion] != HashScheme || d.Status.PendingServiceStatus.RayClusterName != "" {
		t.Errorf("%v, pending %q", kinds(d), d.Status.PendingServiceStatus.RayClusterName)
	}
}

// A random suffix that gives the name of an existing cluster names nothing: the next reconcile draws again.
func TestNameCollisionWaitsForAnotherSuffix(t *testing.T) {
	w, active := serving(t)
	w.svc = w.svc.DeepCopy()
	w.svc.Spec.RayClusterSpec.RayVersion = "2.47.0"
	o := w.observed()
	o.Suffix = strings.TrimPrefix(active, "svc-")
	d := Next(o)
	if p := d.Status.PendingServiceStatus.RayClusterName; p != "" || d.RequeueAfter > time.Second {
		t.Errorf("pending %q, requeue %v; want no name and a quick retry", p, d.RequeueAfter)
	}
}

// A Serve API that cannot be read is said in a Warning event; nothing is applied and nothing switches.
func TestUnreadableServeIsReported(t *testing.T) {
	w, name := serving(t)
	w.serve[name] = ServeRead{Err: errors.New("Ray dashboard http://x: connection refused")}
	d := w.step(t)
	if len(d.Actions) != 0 {
		t.Errorf("actions %v with an unreadable Serve", kinds(d))
	}
	if len(d.Events) != 1 || d.Events[0].Reason != EventFailedToGetServeApplications || !strings.Contains(d.Events[0].Message, "connection refused") {
		t.Errorf("events %+v", d.Events)
	}
	if c := condition(d.Status, rayv1.RayServiceReady); c.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v: the pods still serve", c)
	}
}

// Each reconcile in a row whose Serve reads failed doubles the wait before the next poll, up to a minute: a
// head that stalls every read (10 s each) does not keep a reconcile worker busy every 2 s.
func TestFailingServeReadsBackOff(t *testing.T) {
	w, name := serving(t)
	w.serve[name] = ServeRead{Err: errors.New("Ray dashboard http://x: context deadline exceeded")}
	var got []time.Duration
	for _, failures := range []int{1, 2, 3, 4, 5, 6, 7} {
		w.failures = failures
		got = append(got, w.step(t).RequeueAfter)
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("polls after %v, want %v", got, want)
	}
	w.failures = 0
	delete(w.serve, name)
	w.running(name)
	if d := w.step(t); d.RequeueAfter != PollInterval {
		t.Errorf("once Serve answers: poll after %v, want %v", d.RequeueAfter, PollInterval)
	}
}

// With rayClusterDeletionDelaySeconds 0, a cluster let go is deleted only once a stored status no longer
// names it: the reconcile that lets it go (whose status write may be lost) deletes nothing.
func TestNoDelayDeletesOnlyWhatTheStoredStatusLetGo(t *testing.T) {
	t.Run("a replaced pending cluster", func(t *testing.T) {
		w, _ := serving(t)
		w.svc = w.svc.DeepCopy()
		w.svc.Spec.RayClusterDeletionDelaySeconds = ptr.To[int32](0)
		w.svc.Spec.RayClusterSpec.RayVersion = "2.47.0"
		w.step(t)
		first := w.svc.Status.PendingServiceStatus.RayClusterName
		w.step(t)
		w.addCluster(first)
		w.svc = w.svc.DeepCopy()
		w.svc.Spec.RayClusterSpec.RayVersion = "2.48.0"
		lost := Next(w.observed()) // its status write is lost
		if lost.Status.PendingServiceStatus.RayClusterName == first || has(lost, DeleteCluster) != nil {
			t.Fatalf("pending %q, actions %v: want %s replaced and kept", lost.Status.PendingServiceStatus.RayClusterName, kinds(lost), first)
		}
		if d := w.step(t); has(d, DeleteCluster) != nil || d.RequeueAfter > PollInterval {
			t.Fatalf("the reconcile that replaces %s: %v, requeue %v; want no delete and a requeue", first, kinds(d), d.RequeueAfter)
		}
		w.clusters[first].Annotations[constants.AnnotationDeletionDeadline] = w.now.UTC().Format(time.RFC3339)
		if d := w.step(t); has(d, DeleteCluster) == nil || has(d, DeleteCluster).Name != first {
			t.Fatalf("once the stored status let %s go: %v, want it deleted", first, kinds(d))
		}
	})
	t.Run("the initializing timeout", func(t *testing.T) {
		w := newWorld(service(func(s *rayv1.RayService) {
			s.Annotations = map[string]string{constants.AnnotationInitializingTimeout: "5m"}
			s.Spec.RayClusterDeletionDelaySeconds = ptr.To[int32](0)
		}))
		w.step(t)
		name := w.svc.Status.PendingServiceStatus.RayClusterName
		w.step(t)
		w.addCluster(name)
		w.now = t0.Add(5 * time.Minute)
		if d := w.step(t); has(d, DeleteCluster) != nil || condition(d.Status, rayv1.RayServiceReady).Reason != string(rayv1.RayServiceInitializingTimeout) {
			t.Fatalf("at the timeout: %v, Ready %+v; want the cluster let go, not deleted", kinds(d), condition(d.Status, rayv1.RayServiceReady))
		}
		w.clusters[name].Annotations[constants.AnnotationDeletionDeadline] = w.now.UTC().Format(time.RFC3339)
		if d := w.step(t); has(d, DeleteCluster) == nil {
			t.Fatalf("after the timeout was stored: %v, want %s deleted", kinds(d), name)
		}
		delete(w.clusters, name)
		if d := w.step(t); len(d.Actions) != 0 || d.RequeueAfter != 0 {
			t.Fatalf("failed for good with nothing left: %v, requeue %v; want no action and no poll", kinds(d), d.RequeueAfter)
		}
	})
}

// With kray.io/in-place-worker-upgrade, the cluster is built to update in place (RollingUpdate, a group
// surging one worker before it takes one out) and a change of worker groups alone rebuilds it where it serves;
// a change of the head or of a cluster-level field still prepares a new cluster.
func TestInPlaceWorkerUpgrade(t *testing.T) {
	inPlace := func(s *rayv1.RayService) {
		s.Annotations = map[string]string{constants.AnnotationInPlaceWorkerUpgrade: "true"}
	}
	w, active := serving(t, inPlace)
	built := w.clusters[active]
	if !spec.Rolling(built) || built.Annotations[constants.AnnotationHeadHash] == "" {
		t.Fatalf("cluster built with upgradeStrategy %+v, annotations %v", built.Spec.UpgradeStrategy, built.Annotations)
	}
	ru := built.Spec.WorkerGroupSpecs[0].RollingUpdate
	if ru == nil || ru.MaxSurge.IntValue() != 1 || ru.MaxUnavailable.IntValue() != 0 {
		t.Fatalf("worker group rollingUpdate %+v, want maxSurge 1, maxUnavailable 0", ru)
	}
	for _, tc := range []struct {
		name string
		edit func(*rayv1.RayClusterSpec)
		new  bool
	}{
		{"worker image", func(s *rayv1.RayClusterSpec) {
			s.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
		}, false},
		{"worker env", func(s *rayv1.RayClusterSpec) {
			c := &s.WorkerGroupSpecs[0].Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "X", Value: "1"})
		}, false},
		{"head image", func(s *rayv1.RayClusterSpec) {
			s.HeadGroupSpec.Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
		}, true},
		{"rayVersion", func(s *rayv1.RayClusterSpec) { s.RayVersion = "2.47.0" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, active := serving(t, inPlace)
			w.svc = w.svc.DeepCopy()
			tc.edit(&w.svc.Spec.RayClusterSpec)
			d := w.step(t)
			pending := d.Status.PendingServiceStatus.RayClusterName
			if tc.new {
				if pending == "" || has(d, UpdateCluster) != nil {
					t.Errorf("actions %v, pending %q; want a new cluster", kinds(d), pending)
				}
				return
			}
			a := has(d, UpdateCluster)
			if a == nil || a.Name != active || pending != "" {
				t.Fatalf("actions %v, pending %q; want %s rebuilt in place", kinds(d), pending, active)
			}
			if !spec.Rolling(a.Cluster) || a.Cluster.Annotations[constants.AnnotationClusterHash] != ClusterHash(&w.svc.Spec.RayClusterSpec) {
				t.Errorf("rebuilt cluster: strategy %+v, annotations %v", a.Cluster.Spec.UpgradeStrategy, a.Cluster.Annotations)
			}
		})
	}
	// Without the annotation a worker change takes a new cluster, as before.
	w, _ = serving(t)
	w.svc = w.svc.DeepCopy()
	w.svc.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.47.0"
	if d := w.step(t); d.Status.PendingServiceStatus.RayClusterName == "" {
		t.Errorf("without the annotation: actions %v, no pending cluster", kinds(d))
	}
}
