package raycluster

import (
	"testing"

	kruisepub "github.com/openkruise/kruise-api/apps/pub"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
)

// A pod update matters unless all it changes is the binding, a condition kray does not read, or a hooked
// pod's lifecycle settling into Normal; the old pod is never modified.
func TestPodChangeMatters(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: "w-1", Namespace: "ns", ResourceVersion: "1",
				Labels: map[string]string{
					constants.LabelCluster: "c", constants.LabelNodeType: constants.NodeTypeWorker,
					constants.LabelKruiseLifecycleState: constants.KruiseStatePreparingNormal,
				},
				Annotations: map[string]string{kruisepub.LifecycleTimestampKey: "2026-12-01T00:00:00Z"},
			},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-worker", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			}}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionFalse},
			}},
		}
	}
	hooked := func(p *corev1.Pod) { p.Labels[constants.LabelDrainHook] = constants.DrainHookValue }
	setCondition := func(p *corev1.Pod, t corev1.PodConditionType, s corev1.ConditionStatus) {
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == t {
				p.Status.Conditions[i].Status = s
				return
			}
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: s})
	}
	settle := func(p *corev1.Pod) {
		p.Labels[constants.LabelKruiseLifecycleState] = constants.KruiseStateNormal
		p.Annotations[kruisepub.LifecycleTimestampKey] = "2026-12-01T00:00:01Z"
	}
	cases := []struct {
		name      string
		before    func(*corev1.Pod)
		change    func(*corev1.Pod)
		wantMatch bool
	}{
		{name: "nothing but the resource version", change: func(p *corev1.Pod) { p.ResourceVersion = "2" }},
		{name: "bound to a node", change: func(p *corev1.Pod) {
			p.Spec.NodeName = "node-1"
			setCondition(p, corev1.PodScheduled, corev1.ConditionTrue)
		}},
		{name: "the default scheduler refuses the pod", change: func(p *corev1.Pod) { setCondition(p, corev1.PodScheduled, corev1.ConditionFalse) }},
		{name: "a batch scheduler refuses the pod", before: func(p *corev1.Pod) { p.Spec.SchedulerName = "yunikorn" },
			change: func(p *corev1.Pod) { setCondition(p, corev1.PodScheduled, corev1.ConditionFalse) }, wantMatch: true},
		{name: "a batch scheduler binds the pod it refused", before: func(p *corev1.Pod) {
			p.Spec.SchedulerName = "yunikorn"
			setCondition(p, corev1.PodScheduled, corev1.ConditionFalse)
		}, change: func(p *corev1.Pod) {
			p.Spec.NodeName = "node-1"
			setCondition(p, corev1.PodScheduled, corev1.ConditionTrue)
		}, wantMatch: true},
		{name: "Kruise's InPlaceUpdateReady", change: func(p *corev1.Pod) { setCondition(p, kruisepub.InPlaceUpdateReady, corev1.ConditionTrue) }},
		{name: "Kruise's KruisePodReady", change: func(p *corev1.Pod) {
			setCondition(p, kruisepub.KruisePodReadyConditionType, corev1.ConditionTrue)
		}},
		{name: "hooked pod settles into Normal", before: hooked, change: settle},
		{name: "pod without the hook settles into Normal", change: settle, wantMatch: true},
		{name: "hooked pod enters PreparingDelete", before: func(p *corev1.Pod) { hooked(p); settle(p) }, change: func(p *corev1.Pod) {
			p.Labels[constants.LabelKruiseLifecycleState] = constants.KruiseStatePreparingDelete
		}, wantMatch: true},
		{name: "hooked pod back to Normal from PreparingDelete", before: func(p *corev1.Pod) {
			hooked(p)
			p.Labels[constants.LabelKruiseLifecycleState] = constants.KruiseStatePreparingDelete
		}, change: settle, wantMatch: true},
		{name: "drain hook label added", change: hooked, wantMatch: true},
		{name: "Ready", change: func(p *corev1.Pod) { setCondition(p, corev1.PodReady, corev1.ConditionTrue) }, wantMatch: true},
		{name: "Ready's reason", change: func(p *corev1.Pod) { p.Status.Conditions[0].Reason = "ContainersNotReady" }, wantMatch: true},
		{name: "a condition kray does not know", change: func(p *corev1.Pod) { setCondition(p, "example.com/Gate", corev1.ConditionTrue) }, wantMatch: true},
		{name: "phase", change: func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, wantMatch: true},
		{name: "pod IP", change: func(p *corev1.Pod) { p.Status.PodIP = "10.0.0.1" }, wantMatch: true},
		{name: "being deleted", change: func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }, wantMatch: true},
		{name: "a container's resources", change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		}, wantMatch: true},
		{name: "another annotation", change: func(p *corev1.Pod) { p.Annotations["a"] = "b" }, wantMatch: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			oldPod := base()
			if tc.before != nil {
				tc.before(oldPod)
			}
			newPod := oldPod.DeepCopy()
			tc.change(newPod)
			kept := oldPod.DeepCopy()
			if got := podChangeMatters(oldPod, newPod); got != tc.wantMatch {
				t.Errorf("podChangeMatters = %v, want %v", got, tc.wantMatch)
			}
			if got := podChangeMatters(oldPod, oldPod.DeepCopy()); got {
				t.Error("an identical pod matters")
			}
			if !equality.Semantic.DeepEqual(kept, oldPod) {
				t.Error("podChangeMatters modified the old pod")
			}
		})
	}
}

// BenchmarkPodChangeMatters compares a worker pod as kray builds it with its binding: the commonest update.
func BenchmarkPodChangeMatters(b *testing.B) {
	rc := cluster("c").group("small", 1).obj()
	cs := builder.WorkerCloneSet(rc, &rc.Spec.WorkerGroupSpecs[0], builder.Options{}, false)
	oldPod := podFromTemplate(cs, "CloneSet", cs.Spec.Template, "r1", "c-small-abcde")
	newPod := oldPod.DeepCopy()
	newPod.Spec.NodeName = "node-1"
	b.ReportAllocs()
	for b.Loop() {
		if podChangeMatters(oldPod, newPod) {
			b.Fatal("a binding matters")
		}
	}
}
