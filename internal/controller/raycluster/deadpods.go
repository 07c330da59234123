package raycluster

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/scale"
)

// deleteDeadPods deletes the only pods kray ever deletes directly: worker pods that exited for good (their
// CloneSet has already replaced them and would leave them behind), and pods whose template asked for
// restartPolicy Never and whose Ray container exited (their workload replaces them with a fresh pod). Both
// are final states, and each delete carries the pod's UID, so a cached view can never delete a live pod.
func (r *Reconciler) deleteDeadPods(ctx context.Context, s *state) error {
	var errs []error
	var workloads []types.UID
	if hs := s.children.headSet; hs != nil && ownedBy(hs, s.rc) {
		workloads = append(workloads, hs.UID)
	}
	for i := range s.children.cloneSets {
		cs := &s.children.cloneSets[i]
		if !ownedBy(cs, s.rc) {
			continue
		}
		workloads = append(workloads, cs.UID)
		for _, p := range scale.DeadPods(s.children.pods, cs.UID) {
			errs = append(errs, r.deleteReported(ctx, s, p, fmt.Sprintf("it exited with phase %s (%s); CloneSet %s has replaced it", p.Status.Phase, p.Status.Reason, cs.Name)))
		}
	}
	for _, p := range scale.ExitedUnderNever(s.children.pods, workloads) {
		errs = append(errs, r.deleteReported(ctx, s, p, "its Ray container exited and its template asks for restartPolicy Never; its workload creates a fresh pod"))
	}
	return errors.Join(errs...)
}

// deleteReported deletes the pod and queues an event that says why.
func (r *Reconciler) deleteReported(ctx context.Context, s *state, p *corev1.Pod, why string) error {
	reason := EventDeletedWorkerPod
	if p.Labels[constants.LabelNodeType] == constants.NodeTypeHead {
		reason = EventDeletedHeadPod
	}
	if err := r.deletePod(ctx, p.DeepCopy()); err != nil {
		s.warn(EventFailedToDeletePod, "Failed to delete pod %s/%s: %v", p.Namespace, p.Name, err)
		return fmt.Errorf("delete pod %s: %w", p.Name, err)
	}
	s.normal(reason, "Deleted pod %s/%s: %s", p.Namespace, p.Name, why)
	return nil
}
