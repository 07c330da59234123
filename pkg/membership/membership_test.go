package membership

import (
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/ray"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// at is t0 plus s seconds, on the operator's clock.
func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// pod is a running pod named name whose Ray container runs the run named run; the timestamps the kubelet
// writes are left out on purpose: the decision never reads them.
func pod(name, run string, ready bool) *corev1.Pod {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-worker"}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ipOf(name),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "ray-worker", ContainerID: "containerd://" + run,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			}},
		},
	}
}

// ipOf is the IP of the pod named name.
func ipOf(name string) string { return "10.0.0." + name[len(name)-1:] }

// worker is the Worker of pod(name, run, ready).
func worker(name, run string, ready bool) Worker {
	w, ok := WorkerOf(pod(name, run, ready))
	if !ok {
		panic("not a running worker: " + name)
	}
	return w
}

var (
	headPod  = pod("head-0", "h1", true)
	head     = HeadOf(headPod)
	headNode = ray.Node{ID: []byte("h"), InstanceID: "head-0", IP: ipOf("head-0"), Status: ray.NodeStatusRunning}
)

// listing is an answer of head's GCS that lists the named pods' nodes.
func listing(names ...string) []ray.Node {
	out := []ray.Node{headNode}
	for _, n := range names {
		out = append(out, ray.Node{ID: []byte(n), InstanceID: n, IP: ipOf(n), Status: ray.NodeStatusIdle})
	}
	return out
}

// step is one reconcile: the pods as observed, and the GCS's answer when it is asked (nil: none came).
type step struct {
	at      int
	head    *Head
	workers []Worker
	nodes   []ray.Node
	// cluster is the cluster ID the GCS reports with its answer ("" none).
	cluster string
	// ask, later and lost are what the step must give; retry, when set, is the answer's next grace end.
	ask   bool
	later int
	lost  map[string]Reason
	retry int
}

func TestMembershipOverTime(t *testing.T) {
	ft := Options{FaultTolerant: true}
	otherHead := HeadOf(pod("head-0", "h2", true))
	// A step with no workers only shows the head: the runs seen after it are not the operator's first sight.
	oldHead := HeadOf(pod("head-0", "h0", true))
	cases := []struct {
		name  string
		o     Options
		steps []step
	}{{
		name: "steady state: asked once per head run and once per new run to bind it, then never",
		steps: []step{
			{at: 0, workers: []Worker{worker("w-1", "a", true)}, nodes: listing("w-1"), ask: true, later: 30},
			{at: 100, workers: []Worker{worker("w-1", "a", true)}, nodes: listing("w-1"), cluster: "X", ask: true},
			{at: 1000, workers: []Worker{worker("w-1", "a", true), worker("w-2", "b", true)}, later: 1030},
			{at: 1030, workers: []Worker{worker("w-1", "a", true), worker("w-2", "b", true)}, nodes: listing("w-1", "w-2"), cluster: "X", ask: true},
			{at: 2000, workers: []Worker{worker("w-1", "a", true), worker("w-2", "b", true)}},
		},
	}, {
		name: "a new run, not ready, is asked about and lost only after the grace",
		steps: []step{
			{at: -10},
			{at: 0, workers: []Worker{worker("w-1", "a", true)}, nodes: listing("w-1"), ask: true, later: 30},
			{at: 10, workers: []Worker{worker("w-1", "a", true), worker("w-2", "b", false)}, nodes: listing("w-1"), ask: true, later: 30, retry: 70},
			{at: 30, workers: []Worker{worker("w-1", "a", true), worker("w-2", "b", false)}, nodes: listing("w-1"), ask: true, later: 70, retry: 70},
			{at: 69, workers: []Worker{worker("w-1", "a", true), worker("w-2", "b", false)}, later: 70},
			{at: 70, workers: []Worker{worker("w-1", "a", true), worker("w-2", "b", false)}, nodes: listing("w-1"), ask: true, lost: map[string]Reason{"w-2": ReasonNotInGCS}},
		},
	}, {
		name: "head replaced without fault tolerance: unbound runs of the old GCS are lost 75 s after the first answer",
		steps: []step{
			{at: -100, head: &oldHead, workers: []Worker{worker("w-1", "a", true), worker("w-2", "b", true)}, nodes: listing("w-1", "w-2"), ask: true, later: -70},
			{at: 0, workers: []Worker{worker("w-1", "a", true), worker("w-2", "b", true)}, nodes: listing(), ask: true},
			{at: 74, workers: []Worker{worker("w-1", "a", true), worker("w-2", "b", true)}, later: 75},
			{at: 75, workers: []Worker{worker("w-1", "a", true), worker("w-2", "b", true)}, nodes: listing(), ask: true,
				lost: map[string]Reason{"w-1": ReasonHeadReplaced, "w-2": ReasonHeadReplaced}},
		},
	}, {
		name: "a run bound to the old cluster ID is lost at the first answer of a GCS with another",
		steps: []step{
			{at: -100, head: &oldHead, workers: []Worker{worker("w-1", "a", true)}, nodes: listing("w-1"), cluster: "X", ask: true, later: -70},
			{at: -70, head: &oldHead, workers: []Worker{worker("w-1", "a", true)}, nodes: listing("w-1"), cluster: "X", ask: true},
			{at: -60, head: &oldHead, workers: []Worker{worker("w-1", "a", true)}},
			{at: 0, workers: []Worker{worker("w-1", "a", true)}, nodes: listing(), cluster: "Y", ask: true, lost: map[string]Reason{"w-1": ReasonHeadReplaced}},
		},
	}, {
		name: "a bound run waits the grace while the new GCS's ID is not known, or is the same",
		steps: []step{
			{at: -100, head: &oldHead, workers: []Worker{worker("w-1", "a", true)}, nodes: listing("w-1"), cluster: "X", ask: true, later: -70},
			{at: -70, head: &oldHead, workers: []Worker{worker("w-1", "a", true)}, nodes: listing("w-1"), cluster: "X", ask: true},
			{at: 0, workers: []Worker{worker("w-1", "a", true)}, nodes: listing(), ask: true, retry: 75},
			{at: 10, workers: []Worker{worker("w-1", "a", true)}, nodes: listing(), cluster: "X", ask: false, later: 75},
			{at: 75, workers: []Worker{worker("w-1", "a", true)}, nodes: listing(), cluster: "X", ask: true, lost: map[string]Reason{"w-1": ReasonHeadReplaced}},
		},
	}, {
		name: "under fault tolerance a bound run is never lost for its cluster ID",
		o:    ft,
		steps: []step{
			{at: -100, head: &oldHead, workers: []Worker{worker("w-1", "a", true)}, nodes: listing("w-1"), cluster: "X", ask: true},
			{at: 0, workers: []Worker{worker("w-1", "a", true)}, nodes: listing(), cluster: "Y", ask: true, retry: 60},
			{at: 60, workers: []Worker{worker("w-1", "a", true)}, nodes: listing(), cluster: "Y", ask: true, lost: map[string]Reason{"w-1": ReasonNotInGCS}},
		},
	}, {
		name: "a listing within BindAfter of the run binds nothing",
		steps: []step{
			{at: -100, head: &oldHead, workers: []Worker{worker("w-1", "a", true)}, nodes: listing("w-1"), cluster: "X", ask: true, later: -70},
			{at: -71, head: &otherHead, workers: []Worker{worker("w-1", "a", true)}, nodes: listing("w-1"), cluster: "X", ask: true, later: -70},
			{at: 0, workers: []Worker{worker("w-1", "a", true)}, nodes: listing(), cluster: "Y", ask: true, retry: 75},
		},
	}, {
		name: "a run that changed is not bound by its pod's former run",
		steps: []step{
			{at: -100, head: &oldHead, workers: []Worker{worker("w-1", "a", true)}, nodes: listing("w-1"), cluster: "X", ask: true, later: -70},
			{at: -70, head: &oldHead, workers: []Worker{worker("w-1", "a", true)}, nodes: listing("w-1"), cluster: "X", ask: true},
			{at: -10, head: &oldHead, workers: []Worker{worker("w-1", "b", false)}, nodes: listing("w-1"), cluster: "X", ask: true, later: 20},
			{at: 0, workers: []Worker{worker("w-1", "b", false)}, nodes: listing(), cluster: "Y", ask: true, later: 20, retry: 75},
		},
	}, {
		name: "head replaced with fault tolerance: runs that do not reconnect wait the full grace",
		o:    ft,
		steps: []step{
			{at: -10},
			{at: 0, workers: []Worker{worker("w-1", "a", true)}, nodes: listing(), ask: true},
			{at: 30, workers: []Worker{worker("w-1", "a", true)}, later: 60},
			{at: 60, workers: []Worker{worker("w-1", "a", true)}, nodes: listing(), ask: true, lost: map[string]Reason{"w-1": ReasonNotInGCS}},
		},
	}, {
		name: "a run that registers within the grace is never lost",
		steps: []step{
			{at: -10},
			{at: 0, workers: []Worker{worker("w-1", "a", false)}, nodes: listing(), ask: true, later: 30},
			{at: 5, workers: []Worker{worker("w-1", "a", true)}, later: 60},
			{at: 60, workers: []Worker{worker("w-1", "a", true)}, nodes: listing("w-1"), ask: true},
			{at: 500, workers: []Worker{worker("w-1", "a", true)}},
		},
	}, {
		name: "a run Ray restarted starts over",
		steps: []step{
			{at: -10},
			{at: 0, workers: []Worker{worker("w-1", "a", true)}, nodes: listing(), ask: true, later: 30},
			{at: 29, workers: []Worker{worker("w-1", "b", false)}, nodes: listing(), ask: true, later: 59},
			{at: 40, workers: []Worker{worker("w-1", "b", false)}, later: 89},
			{at: 89, workers: []Worker{worker("w-1", "b", false)}, nodes: listing(), ask: true, lost: map[string]Reason{"w-1": ReasonNotInGCS}},
		},
	}, {
		name: "an answer that is not this cluster's GCS records nothing",
		steps: []step{
			{at: -10},
			{at: 0, workers: []Worker{worker("w-1", "a", true)}, nodes: []ray.Node{}, cluster: "Z", ask: true, later: 30},
			{at: 100, workers: []Worker{worker("w-1", "a", true)}, nodes: []ray.Node{{InstanceID: "head-0", IP: "10.9.9.9"}}, cluster: "Z", ask: true},
			{at: 200, workers: []Worker{worker("w-1", "a", true)}, nodes: []ray.Node{{InstanceID: "other-0", IP: ipOf("head-0")}}, cluster: "Z", ask: true},
			{at: 300, workers: []Worker{worker("w-1", "a", true)}, nodes: []ray.Node{{InstanceID: "head-0", IP: ipOf("head-0"), Status: ray.NodeStatusDead}}, cluster: "Z", ask: true},
			{at: 400, workers: []Worker{worker("w-1", "a", true)}, nodes: listing(), ask: true},
			{at: 459, workers: []Worker{worker("w-1", "a", true)}, later: 460},
		},
	}, {
		name: "a new head run starts everything over",
		steps: []step{
			{at: 0, workers: []Worker{worker("w-1", "a", true)}, nodes: listing(), ask: true, later: 30},
			{at: 25, head: &otherHead, workers: []Worker{worker("w-1", "a", true)}, nodes: listing(), ask: true, later: 30},
			{at: 30, head: &otherHead, workers: []Worker{worker("w-1", "a", true)}, later: 100},
			{at: 100, head: &otherHead, workers: []Worker{worker("w-1", "a", true)}, nodes: listing(), ask: true, lost: map[string]Reason{"w-1": ReasonHeadReplaced}},
		},
	}, {
		name: "a listed worker that loses its readiness is asked about again",
		steps: []step{
			{at: -10},
			{at: 0, workers: []Worker{worker("w-1", "a", true)}, nodes: listing("w-1"), ask: true, later: 30},
			{at: 10, workers: []Worker{worker("w-1", "a", true)}, later: 30},
			{at: 20, workers: []Worker{worker("w-1", "a", false)}, nodes: listing(), ask: true, later: 30},
			{at: 80, workers: []Worker{worker("w-1", "a", false)}, nodes: listing(), ask: true, lost: map[string]Reason{"w-1": ReasonNotInGCS}},
		},
	}, {
		name: "a listed worker that is never ready is asked about once the last answer is a grace old",
		steps: []step{
			{at: -10},
			{at: 0, workers: []Worker{worker("w-1", "a", false)}, nodes: listing("w-1"), ask: true, later: 30},
			{at: 30, workers: []Worker{worker("w-1", "a", false)}, nodes: listing("w-1"), ask: true},
			{at: 89, workers: []Worker{worker("w-1", "a", false)}},
			{at: 90, workers: []Worker{worker("w-1", "a", false)}, nodes: listing("w-1"), ask: true},
			{at: 91, workers: []Worker{worker("w-1", "a", false)}},
		},
	}, {
		name: "a dead node counts for nothing; a node without instance ID at the pod's IP counts",
		steps: []step{
			{at: -10},
			{at: 0, workers: []Worker{worker("w-1", "a", true), worker("w-2", "b", true)},
				nodes: []ray.Node{headNode, {InstanceID: "w-1", IP: ipOf("w-1"), Status: ray.NodeStatusDead}, {IP: ipOf("w-2"), Status: ray.NodeStatusIdle}}, ask: true, later: 30},
			{at: 60, workers: []Worker{worker("w-1", "a", true), worker("w-2", "b", true)}, nodes: listing("w-2"), ask: true, lost: map[string]Reason{"w-1": ReasonNotInGCS}},
		},
	}, {
		name: "runs first seen with the head (an operator that starts) get the grace of a replaced head",
		steps: []step{
			{at: 0, workers: []Worker{worker("w-1", "a", true)}, nodes: listing(), ask: true, later: 30, retry: 75},
			{at: 60, workers: []Worker{worker("w-1", "a", true)}, later: 75},
			{at: 75, workers: []Worker{worker("w-1", "a", true)}, nodes: listing(), ask: true, lost: map[string]Reason{"w-1": ReasonHeadReplaced}},
		},
	}, {
		name: "nothing is asked or decided while the head is not running and ready",
		steps: []step{
			{at: 0, head: &Head{}, workers: []Worker{worker("w-1", "a", false)}},
			{at: 1000, head: &Head{}, workers: []Worker{worker("w-1", "a", false)}},
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var m Memory
			for _, s := range tc.steps {
				h := head
				if s.head != nil {
					h = *s.head
				}
				l := m.Observe(h, s.workers, at(s.at), tc.o)
				if l.Ask != s.ask {
					t.Fatalf("at %d: ask = %v, want %v", s.at, l.Ask, s.ask)
				}
				if want := at(s.later); (s.later == 0 && !l.Later.IsZero()) || (s.later != 0 && !l.Later.Equal(want)) {
					t.Errorf("at %d: later = %v, want +%d s", s.at, l.Later, s.later)
				}
				if !l.Ask {
					continue
				}
				got := map[string]Reason{}
				v := m.Heard(h, s.workers, Answer{Nodes: s.nodes, ClusterID: s.cluster}, at(s.at), tc.o)
				if s.retry != 0 && !v.Later.Equal(at(s.retry)) {
					t.Errorf("at %d: the answer's later = %v, want +%d s", s.at, v.Later, s.retry)
				}
				for _, lost := range v.Lost {
					got[lost.Worker.Pod.Name] = lost.Reason
					if lost.Out < lost.Grace {
						t.Errorf("at %d: %s lost after %s, within its grace %s", s.at, lost.Worker.Pod.Name, lost.Out, lost.Grace)
					}
				}
				if !maps.Equal(got, s.lost) && (len(got) > 0 || len(s.lost) > 0) {
					t.Fatalf("at %d: lost = %v, want %v", s.at, got, s.lost)
				}
			}
		})
	}
}

// Restarts count the restarts asked since the pod was last listed, and back-offs double from the grace up to
// MaxBackOff.
func TestRestartsAndBackOff(t *testing.T) {
	var m Memory
	w := worker("w-1", "a", false)
	m.Observe(head, []Worker{w}, at(0), Options{})
	m.Restarted(w)
	m.Restarted(w)
	if n := m.Restarts(w); n != 2 {
		t.Errorf("restarts = %d, want 2", n)
	}
	m.Heard(head, []Worker{w}, Answer{Nodes: listing("w-1")}, at(1), Options{})
	if n := m.Restarts(w); n != 0 {
		t.Errorf("restarts once listed = %d, want 0", n)
	}
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{{0, time.Minute}, {1, 2 * time.Minute}, {2, 4 * time.Minute}, {3, MaxBackOff}, {40, MaxBackOff}} {
		if got := BackOff(time.Minute, tc.n); got != tc.want {
			t.Errorf("BackOff(1m, %d) = %s, want %s", tc.n, got, tc.want)
		}
	}
	if _, asked := m.WasAsked(w.Run); asked {
		t.Error("a run never asked reads as asked")
	}
	if first := m.Asked(w.Run, at(5)); !first.Equal(at(5)) || !m.Asked(w.Run, at(9)).Equal(at(5)) {
		t.Errorf("Asked keeps the first time: got %v", first)
	}
}

// A restart's count outlives the restart: the pod is no Worker while its Ray container restarts, and its
// count goes only with the pod.
func TestRestartsOutliveTheRestart(t *testing.T) {
	var m Memory
	w := worker("w-1", "a", false)
	m.Observe(head, []Worker{w}, at(0), Options{})
	m.Restarted(w)
	m.Observe(head, nil, at(2), Options{}) // the container restarts
	m.Pods([]string{string(w.Pod.UID)})
	next := worker("w-1", "b", false)
	m.Observe(head, []Worker{next}, at(4), Options{})
	if n := m.Restarts(next); n != 1 {
		t.Fatalf("restarts after the restart = %d, want 1", n)
	}
	m.Observe(otherHeadOf("h3"), []Worker{next}, at(5), Options{})
	if n := m.Restarts(next); n != 1 {
		t.Fatalf("restarts after a new head run = %d, want 1", n)
	}
	m.Pods(nil)
	if n := m.Restarts(next); n != 0 {
		t.Fatalf("restarts once the pod is gone = %d, want 0", n)
	}
}

// otherHeadOf is the head pod running the run named run.
func otherHeadOf(run string) Head { return HeadOf(pod("head-0", run, true)) }

// Pods that are held by Kruise, going, or whose Ray container does not run are no Worker; a head that is
// not ready is no Head.
func TestWhatIsReadFromPods(t *testing.T) {
	held := pod("w-1", "a", true)
	held.Labels[constants.LabelKruiseLifecycleState] = constants.KruiseStatePreparingDelete
	deleting := pod("w-2", "b", true)
	deleting.DeletionTimestamp = &metav1.Time{Time: at(0)}
	waiting := pod("w-3", "c", false)
	waiting.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	for _, p := range []*corev1.Pod{held, deleting, waiting} {
		if _, ok := WorkerOf(p); ok {
			t.Errorf("WorkerOf(%s) is a worker, want none", p.Name)
		}
	}
	if h := HeadOf(pod("head-0", "h", false)); h.Run != "" {
		t.Errorf("HeadOf(not ready head) = %+v, want none", h)
	}
	if h := HeadOf(nil); h.Run != "" {
		t.Errorf("HeadOf(nil) = %+v", h)
	}
	dual := pod("w-4", "d", true)
	dual.Status.PodIPs = []corev1.PodIP{{IP: dual.Status.PodIP}, {IP: "fd00::4"}}
	dual.Annotations = map[string]string{constants.AnnotationMultusNetworkStatus: `[{"name":"n","ips":["192.168.0.4","fd00::4"]}]`}
	if got, want := IPs(dual), []string{ipOf("w-4"), "fd00::4", "192.168.0.4"}; !slices.Equal(got, want) {
		t.Errorf("IPs = %v, want %v", got, want)
	}
}
