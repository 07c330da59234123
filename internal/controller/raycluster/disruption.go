package raycluster

import (
	"context"
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// reconcileHeadDisruptionBudget keeps the head's PodDisruptionBudget while the RayCluster asks for one,
// bringing it back to kray's spec when changed, and deletes the one the RayCluster controls once it no longer
// asks. Neither touches a pod.
func (r *Reconciler) reconcileHeadDisruptionBudget(ctx context.Context, s *state) error {
	desired := builder.HeadDisruptionBudget(s.effective)
	live := &policyv1.PodDisruptionBudget{}
	if desired == nil {
		return r.deleteHeadDisruptionBudget(ctx, s, live)
	}
	if err := r.createOnce(ctx, s, desired, live, EventCreatedPDB, EventFailedToWritePDB); err != nil || live.UID == "" {
		return err
	}
	if equality.Semantic.DeepEqual(live.Spec, desired.Spec) {
		return nil
	}
	updated := live.DeepCopy()
	updated.Spec = desired.Spec
	if err := r.Writer.Update(ctx, updated); err != nil {
		s.warn(EventFailedToWritePDB, "Failed to update PodDisruptionBudget %s/%s: %v", live.Namespace, live.Name, err)
		return fmt.Errorf("update PodDisruptionBudget %s: %w", live.Name, err)
	}
	s.normal(EventUpdatedPDB, "Updated PodDisruptionBudget %s/%s", live.Namespace, live.Name)
	return nil
}

// deleteHeadDisruptionBudget deletes the head's PodDisruptionBudget if the RayCluster controls one.
func (r *Reconciler) deleteHeadDisruptionBudget(ctx context.Context, s *state, live *policyv1.PodDisruptionBudget) error {
	key := client.ObjectKey{Namespace: s.rc.Namespace, Name: names.HeadDisruptionBudget(s.rc.Name)}
	switch err := r.Cache.Get(ctx, key, live); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read PodDisruptionBudget %s: %w", key.Name, err)
	}
	return r.deleteUnwanted(ctx, s, live, "PodDisruptionBudget", EventDeletedPDB, EventFailedToWritePDB,
		"the RayCluster no longer asks for it ("+constants.AnnotationHeadDisruptionBudget+")")
}
