package membership

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/ray"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// pod is a running pod whose Ray container started at started; notReady, when not zero, is when it lost
// its readiness.
func pod(name string, started, notReady time.Time) *corev1.Pod {
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
	if !notReady.IsZero() {
		ready = corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(notReady)}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-worker"}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.0.0." + name[len(name)-1:],
			Conditions: []corev1.PodCondition{ready},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "ray-worker", ContainerID: "containerd://" + name + started.Format("150405"),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}},
			}},
		},
	}
}

func node(instance string, s ray.NodeStatus) ray.Node {
	return ray.Node{ID: []byte(instance), InstanceID: instance, Status: s}
}

func TestPlanAndDecide(t *testing.T) {
	head := Head{Started: at(100), Ready: at(110)}
	ft := head
	ft.FaultTolerant = true
	held := pod("w-6", at(0), at(200))
	held.Labels[constants.LabelKruiseLifecycleState] = constants.KruiseStatePreparingDelete
	deleting := pod("w-7", at(0), time.Time{})
	deleting.DeletionTimestamp = &metav1.Time{Time: at(300)}
	waiting := pod("w-8", at(0), at(200))
	waiting.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}

	cases := []struct {
		name  string
		pods  []*corev1.Pod
		head  Head
		now   time.Time
		nodes []ray.Node
		// due are the pods the GCS is asked about; restart the pods restarted, with their reasons.
		due     []string
		restart map[string]Reason
		later   time.Time
	}{{
		name: "steady state: ready workers younger than the head ask the GCS nothing",
		pods: []*corev1.Pod{pod("w-1", at(120), time.Time{}), pod("w-2", at(130), time.Time{})},
		head: head, now: at(1000),
	}, {
		name: "head replaced without fault tolerance: older workers restart at once, younger ones stay",
		pods: []*corev1.Pod{pod("w-1", at(0), time.Time{}), pod("w-2", at(50), time.Time{}), pod("w-3", at(120), time.Time{})},
		head: head, now: at(111),
		nodes:   []ray.Node{node("w-3", ray.NodeStatusRunning), node("head", ray.NodeStatusRunning)},
		due:     []string{"w-1", "w-2"},
		restart: map[string]Reason{"w-1": ReasonHeadReplaced, "w-2": ReasonHeadReplaced},
	}, {
		name: "an older worker the new GCS lists (it reconnected) is left alone",
		pods: []*corev1.Pod{pod("w-1", at(0), time.Time{})},
		head: head, now: at(111),
		nodes: []ray.Node{node("w-1", ray.NodeStatusIdle)},
		due:   []string{"w-1"},
	}, {
		name: "a dead node of the pod counts for nothing",
		pods: []*corev1.Pod{pod("w-1", at(0), time.Time{})},
		head: head, now: at(111),
		nodes:   []ray.Node{node("w-1", ray.NodeStatusDead)},
		due:     []string{"w-1"},
		restart: map[string]Reason{"w-1": ReasonHeadReplaced},
	}, {
		name: "with fault tolerance older ready workers are not asked about",
		pods: []*corev1.Pod{pod("w-1", at(0), time.Time{})},
		head: ft, now: at(111),
	}, {
		name: "with fault tolerance a not ready worker waits the grace from the head's readiness",
		pods: []*corev1.Pod{pod("w-1", at(0), at(95))},
		head: ft, now: at(150),
		later: at(170),
	}, {
		name: "with fault tolerance a zombie is restarted once the grace has passed",
		pods: []*corev1.Pod{pod("w-1", at(0), at(95)), pod("w-2", at(0), at(96))},
		head: ft, now: at(171),
		nodes:   []ray.Node{node("w-2", ray.NodeStatusRunning)},
		due:     []string{"w-1", "w-2"},
		restart: map[string]Reason{"w-1": ReasonNotInGCS},
	}, {
		name: "a starting worker is never due before the grace from its container's start",
		pods: []*corev1.Pod{pod("w-1", at(400), at(400))},
		head: head, now: at(430),
		later: at(460),
	}, {
		name: "a worker that lost its readiness later waits the grace from then",
		pods: []*corev1.Pod{pod("w-1", at(120), at(500))},
		head: head, now: at(530),
		later: at(560),
	}, {
		name: "a not ready worker found by its IP when its node has no instance ID",
		pods: []*corev1.Pod{pod("w-1", at(120), at(500))},
		head: head, now: at(600),
		nodes: []ray.Node{{ID: []byte{1}, IP: "10.0.0.1", Status: ray.NodeStatusRunning}},
		due:   []string{"w-1"},
	}, {
		name: "held, deleting and restarting pods are never due",
		pods: []*corev1.Pod{held, deleting, waiting},
		head: head, now: at(1000),
	}, {
		name: "nothing is decided while the head is not ready",
		pods: []*corev1.Pod{pod("w-1", at(0), at(95))},
		head: Head{Started: at(100)}, now: at(1000),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Plan(tc.pods, tc.head, tc.now, DefaultGrace)
			var due []string
			for _, w := range c.Due {
				due = append(due, w.Pod.Name)
			}
			if !slices.Equal(due, tc.due) {
				t.Errorf("due = %v, want %v", due, tc.due)
			}
			if !c.Later.Equal(tc.later) {
				t.Errorf("later = %v, want %v", c.Later, tc.later)
			}
			got := map[string]Reason{}
			for _, r := range c.Decide(tc.nodes) {
				got[r.Worker.Pod.Name] = r.Reason
				if r.Worker.Run == "" {
					t.Errorf("restart of %s names no run", r.Worker.Pod.Name)
				}
			}
			if len(got) != len(tc.restart) {
				t.Fatalf("restarts = %v, want %v", got, tc.restart)
			}
			for name, reason := range tc.restart {
				if got[name] != reason {
					t.Errorf("restart of %s = %q, want %q", name, got[name], reason)
				}
			}
		})
	}
}

func TestHeadOf(t *testing.T) {
	p := pod("head-0", at(100), time.Time{})
	p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(at(110))
	if got := HeadOf(p, false); !got.Started.Equal(at(100)) || !got.Ready.Equal(at(110)) {
		t.Errorf("HeadOf(ready head) = %+v", got)
	}
	notReady := pod("head-0", at(100), at(105))
	if got := HeadOf(notReady, true); !got.Ready.IsZero() || !got.Started.IsZero() || !got.FaultTolerant {
		t.Errorf("HeadOf(not ready head) = %+v, want nothing but the fault tolerance", got)
	}
	if got := HeadOf(nil, false); !got.Ready.IsZero() {
		t.Errorf("HeadOf(nil) = %+v", got)
	}
}
