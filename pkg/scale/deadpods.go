package scale

import (
	"encoding/json"
	"slices"
	"time"

	appspub "github.com/openkruise/kruise-api/apps/pub"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kray-project/kray/pkg/constants"
)

// DeadPods returns the exited pods that a CloneSet (uid) left behind; it has already replaced them, and kray
// deletes them so they neither linger nor get counted.
func DeadPods(pods []corev1.Pod, uid types.UID) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if IsControlledBy(p, uid) && p.DeletionTimestamp == nil && IsDead(p) {
			out = append(out, p)
		}
	}
	return out
}

// ExitedUnderNever returns the running pods whose template asked for restartPolicy Never (recorded by the
// builder in an annotation) and whose Ray container has exited: KubeRay would delete them, so kray does, and
// the workload replaces them with a fresh pod. A restart that Kruise's in-place update made on purpose (a new
// image) is not an exit, nor the end of a raylet that kray drained. Only pods that one of workloads (UIDs)
// controls count: the labels and annotation that select the others are anyone's to write.
func ExitedUnderNever(pods []corev1.Pod, workloads []types.UID) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if !slices.ContainsFunc(workloads, func(uid types.UID) bool { return IsControlledBy(p, uid) }) {
			continue
		}
		if p.DeletionTimestamp != nil || IsDead(p) || p.Annotations[constants.AnnotationRestartPolicy] != string(corev1.RestartPolicyNever) {
			continue
		}
		if len(p.Spec.Containers) == 0 {
			continue
		}
		ray := p.Spec.Containers[constants.RayContainerIndex].Name
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == ray && exited(p, cs) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// exited says whether the container has exited since the pod started, other than for an in-place update.
// Kruise runs the pod with restartPolicy Always, so the kubelet may already have restarted the container:
// a restart counts as an exit unless its last run ended for the pod's in-place update.
func exited(p *corev1.Pod, cs corev1.ContainerStatus) bool {
	switch {
	case cs.State.Terminated != nil:
		return !endedByDrain(p, cs.State.Terminated)
	case cs.RestartCount == 0:
		return false
	}
	return !restartedForInPlaceUpdate(p, cs) && !endedByDrain(p, cs.LastTerminationState.Terminated)
}

// drainClockSkew is how much earlier than kray's recorded drain start a run may end and still be taken for
// the drain's end: the two times come from different clocks (the kubelet's and the operator's).
const drainClockSkew = 10 * time.Second

// endedByDrain says whether the run ended after kray asked Ray to drain the pod's node (kray.io/drain-started):
// Ray's raylet exits once drained and idle, so that end is the drain's, not a failure.
func endedByDrain(p *corev1.Pod, run *corev1.ContainerStateTerminated) bool {
	started, err := time.Parse(time.RFC3339, p.Annotations[constants.AnnotationDrainStarted])
	return err == nil && run != nil && !run.FinishedAt.Time.Before(started.Add(-drainClockSkew))
}

// restartedForInPlaceUpdate says whether the container's last run is the one that Kruise's latest in-place
// update of the pod replaced: the update changed that container, and its last run started before the update
// began and ended after. A run that started after the update (the new image exited) or ended before it is
// an exit. Times have second precision, so a run that started in the second the update began counts as an
// exit: the pod is then replaced, as before in-place updates were told apart.
func restartedForInPlaceUpdate(p *corev1.Pod, cs corev1.ContainerStatus) bool {
	last := cs.LastTerminationState.Terminated
	raw, ok := p.Annotations[appspub.InPlaceUpdateStateKey]
	if last == nil || !ok {
		return false
	}
	var state appspub.InPlaceUpdateState
	if err := json.Unmarshal([]byte(raw), &state); err != nil {
		return false
	}
	if _, ok := state.LastContainerStatuses[cs.Name]; !ok {
		return false
	}
	began := state.UpdateTimestamp
	for _, b := range state.ContainerBatchesRecord {
		if slices.Contains(b.Containers, cs.Name) {
			began = b.Timestamp
		}
	}
	return last.StartedAt.Before(&began) && !last.FinishedAt.Before(&began)
}
