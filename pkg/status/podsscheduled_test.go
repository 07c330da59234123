package status

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kray-project/kray/pkg/constants"
)

func TestPodsScheduled(t *testing.T) {
	bound := func(p corev1.Pod) corev1.Pod { p.Spec.NodeName = "n"; p.Status.Phase = corev1.PodRunning; return p }
	pending := func(p corev1.Pod, conds ...corev1.PodCondition) corev1.Pod {
		p.Spec.NodeName, p.Status.Phase, p.Status.Conditions = "", corev1.PodPending, conds
		return p
	}
	refused := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: `0/5 nodes are available: pod group "rc" has 2 pods, needs 3`}
	for _, tt := range []struct {
		name      string
		scheduler string
		pods      []corev1.Pod
		status    metav1.ConditionStatus
		message   string
	}{
		{name: "the default scheduler: no condition", pods: []corev1.Pod{pending(rayPod("w1", "worker", false), refused)}},
		{name: "every pod bound", scheduler: "yunikorn", status: metav1.ConditionTrue,
			pods: []corev1.Pod{bound(rayPod("rc-head-0", "head", true)), bound(rayPod("w1", "worker", true))}},
		{name: "a gang refused: the first pod's word", scheduler: "scheduler-plugins", status: metav1.ConditionFalse,
			pods:    []corev1.Pod{pending(rayPod("w2", "worker", false), refused), pending(rayPod("w1", "worker", false), refused), bound(rayPod("rc-head-0", "head", true))},
			message: `2 of 3 pods wait for scheduler-plugins; scheduler-plugins says of w1: Unschedulable: 0/5 nodes are available: pod group "rc" has 2 pods, needs 3`},
		{name: "a scheduler that has said nothing", scheduler: "volcano", status: metav1.ConditionFalse,
			pods:    []corev1.Pod{pending(rayPod("rc-head-0", "head", false))},
			message: "1 of 1 pods wait for volcano; volcano has not reported on them yet"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := Compute(cluster(), Observed{Pods: tt.pods, Now: now, BatchScheduler: tt.scheduler})
			c := cond(st, constants.ConditionPodsScheduled)
			if tt.status == "" {
				if c != nil {
					t.Fatalf("condition %+v", c)
				}
				return
			}
			if c == nil || c.Status != tt.status || c.Message != tt.message {
				t.Fatalf("condition %+v, want %s %q", c, tt.status, tt.message)
			}
		})
	}
}
