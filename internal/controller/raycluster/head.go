package raycluster

import (
	"context"
	"fmt"

	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/status"
)

// reconcileHeadStatefulSet creates the head Advanced StatefulSet, and updates it when its template, strategy
// or replicas (suspend) changed. Kruise replaces a failed or evicted head pod with one of the same name.
func (r *Reconciler) reconcileHeadStatefulSet(ctx context.Context, s *state) error {
	desired := builder.HeadStatefulSet(s.effective, s.options)
	live := s.children.headSet
	if live == nil {
		created, err := r.create(ctx, desired)
		if err != nil {
			s.warn(EventFailedToWriteWorkload, "Failed to create head StatefulSet %s: %v", desired.Name, err)
			return fmt.Errorf("create head StatefulSet %s: %w", desired.Name, err)
		}
		if created {
			s.createdHead = true
			s.normal(EventCreatedHeadStatefulSet, "Created head Advanced StatefulSet %s/%s", desired.Namespace, desired.Name)
		}
		return nil
	}
	if !ownedBy(live, s.rc) {
		return notOwnedError("StatefulSet", live.Name)
	}
	s.holdRolloutUnless(status.HeadSetUpdated(live, s.children.pods), live, desired)
	if !headSetDiffers(live, desired) {
		return nil
	}
	fresh := &kruisev1beta1.StatefulSet{}
	changed, err := r.updateFresh(ctx, client.ObjectKeyFromObject(desired), fresh, func() (bool, error) {
		if !headSetDiffers(fresh, desired) {
			return false, nil
		}
		fresh.Spec.Replicas = desired.Spec.Replicas
		fresh.Spec.Template = desired.Spec.Template
		fresh.Spec.UpdateStrategy = desired.Spec.UpdateStrategy
		if fresh.Annotations[constants.AnnotationSpecHash] != desired.Annotations[constants.AnnotationSpecHash] {
			setSpecHash(fresh, desired)
		}
		return true, nil
	})
	if err != nil {
		s.warn(EventFailedToWriteWorkload, "Failed to update head StatefulSet %s: %v", desired.Name, err)
		return fmt.Errorf("update head StatefulSet %s: %w", desired.Name, err)
	}
	if changed {
		s.normal(EventUpdatedWorkload, "Updated head Advanced StatefulSet %s/%s (replicas %d)", desired.Namespace, desired.Name, ptr.Deref(desired.Spec.Replicas, 0))
	}
	return nil
}

// headSetDiffers reports whether the head StatefulSet's replicas or spec hash differ from what kray builds.
func headSetDiffers(live, desired *kruisev1beta1.StatefulSet) bool {
	return ptr.Deref(live.Spec.Replicas, -1) != ptr.Deref(desired.Spec.Replicas, 0) ||
		live.Annotations[constants.AnnotationSpecHash] != desired.Annotations[constants.AnnotationSpecHash]
}
