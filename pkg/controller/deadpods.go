package controller

import (
	"context"
	"errors"
	"fmt"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/scale"
)

// reconcilePodHygiene deletes the only pods kray ever deletes directly: worker pods that exited for good
// (their CloneSet has already replaced them and would leave them behind), and pods whose template asked
// for restartPolicy Never and whose Ray container exited (their workload replaces them with a fresh pod).
func (r *Reconciler) reconcilePodHygiene(ctx context.Context, s *state) error {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(s.rc.Namespace), client.MatchingLabels{constants.LabelCluster: s.rc.Name}); err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	sets := &kruisev1alpha1.CloneSetList{}
	if err := r.Client.List(ctx, sets, client.InNamespace(s.rc.Namespace), client.MatchingLabels{constants.LabelCluster: s.rc.Name}); err != nil {
		return fmt.Errorf("list CloneSets: %w", err)
	}
	var errs []error
	for i := range sets.Items {
		if !ownedBy(&sets.Items[i], s.rc) {
			continue
		}
		for _, p := range scale.DeadPods(pods.Items, sets.Items[i].UID) {
			errs = append(errs, r.deleteReported(ctx, s, p, fmt.Sprintf("it exited with phase %s (%s); CloneSet %s has replaced it", p.Status.Phase, p.Status.Reason, sets.Items[i].Name)))
		}
	}
	for _, p := range scale.ExitedUnderNever(pods.Items) {
		errs = append(errs, r.deleteReported(ctx, s, p, "its Ray container exited and its template asks for restartPolicy Never; its workload creates a fresh pod"))
	}
	return errors.Join(errs...)
}

func (r *Reconciler) deleteReported(ctx context.Context, s *state, p *corev1.Pod, why string) error {
	reason := constants.EventDeletedWorkerPod
	if p.Labels[constants.LabelNodeType] == constants.NodeTypeHead {
		reason = constants.EventDeletedHeadPod
	}
	if err := r.deletePod(ctx, p); err != nil {
		s.warn(constants.EventFailedToDeletePod, "Failed to delete pod %s/%s: %v", p.Namespace, p.Name, err)
		return fmt.Errorf("delete pod %s: %w", p.Name, err)
	}
	s.normal(reason, "Deleted pod %s/%s: %s", p.Namespace, p.Name, why)
	return nil
}
