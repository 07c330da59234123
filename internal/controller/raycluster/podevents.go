package raycluster

import (
	"bytes"
	"maps"
	"slices"

	kruisepub "github.com/openkruise/kruise-api/apps/pub"
	corev1 "k8s.io/api/core/v1"

	"github.com/kray-project/kray/pkg/constants"
)

// unreadPodConditions are the pod conditions no reconcile reads: the scheduler's, and the readiness gates
// Kruise keeps on every pod of its workloads. The Ready condition they feed is read, and changes on an event
// of its own.
var unreadPodConditions = []corev1.PodConditionType{
	corev1.PodScheduled,
	kruisepub.InPlaceUpdateReady,
	kruisepub.KruisePodReadyConditionType,
}

// podChangeMatters reports whether a pod update can change what a reconcile of its cluster does or reports.
// It is false only when everything that changed is one of a known list of fields kray never reads: the node
// binding, the conditions in unreadPodConditions (except a batch scheduler's PodScheduled=False, which the
// PodsScheduled condition reports), and Kruise's lifecycle moving a pod that already carries
// the drain hook from PreparingNormal to Normal (the drain phases act on PreparingDelete pods, and on Normal
// pods without the hook). Any other difference, including one in a field added later, matters.
//
// The two pods are compared in their protobuf encoding, which is deterministic (map keys sorted) and cheaper
// than a reflective comparison (docs/design-notes.md gives the figures); every pod update passes here. A value with two spellings (a
// quantity written "1" and "1000m") would count as a change, which costs a reconcile, never a missed one.
func podChangeMatters(oldPod, newPod *corev1.Pod) bool {
	a, errOld := readPart(oldPod).Marshal()
	b, errNew := readPart(newPod).Marshal()
	return errOld != nil || errNew != nil || !bytes.Equal(a, b)
}

// readPart is a shallow copy of p without the fields podChangeMatters disregards; it shares p's other
// slices and maps, so it must not be modified.
func readPart(p *corev1.Pod) *corev1.Pod {
	c := *p
	c.ResourceVersion, c.ManagedFields = "", nil
	c.Spec.NodeName = ""
	batch := p.Spec.SchedulerName != "" && p.Spec.SchedulerName != corev1.DefaultSchedulerName
	c.Status.Conditions = slices.DeleteFunc(slices.Clone(p.Status.Conditions), func(cond corev1.PodCondition) bool {
		// A batch scheduler's word on a pod it does not bind is reported (the PodsScheduled condition).
		return slices.Contains(unreadPodConditions, cond.Type) && !(batch && cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse)
	})
	if p.Labels[constants.LabelDrainHook] == constants.DrainHookValue && quietLifecycle(p.Labels[constants.LabelKruiseLifecycleState]) {
		c.Labels = maps.Clone(p.Labels)
		delete(c.Labels, constants.LabelKruiseLifecycleState)
		c.Annotations = maps.Clone(p.Annotations)
		delete(c.Annotations, kruisepub.LifecycleTimestampKey)
	}
	return &c
}

// quietLifecycle reports whether a Kruise lifecycle state asks nothing of a pod that carries the drain hook.
func quietLifecycle(state string) bool {
	return state == constants.KruiseStatePreparingNormal || state == constants.KruiseStateNormal
}
