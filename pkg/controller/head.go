package controller

import (
	"context"
	"fmt"

	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/status"
)

// reconcileAutoscalerRBAC creates the autoscaler's ServiceAccount, Role and RoleBinding once. A
// ServiceAccount the head template names must already exist: kray does not create the user's account.
func (r *Reconciler) reconcileAutoscalerRBAC(ctx context.Context, s *state) error {
	rc := s.rc
	if !builder.AutoscalingEnabled(rc) {
		return nil
	}
	if builder.UserServiceAccount(rc) {
		sa := &corev1.ServiceAccount{}
		key := types.NamespacedName{Namespace: rc.Namespace, Name: builder.AutoscalerServiceAccountName(rc)}
		if err := r.APIReader.Get(ctx, key, sa); err != nil {
			if apierrors.IsNotFound(err) {
				s.warn(constants.EventAutoscalerSANotFound, "ServiceAccount %s, named by the head template, does not exist; create it for the autoscaler", key)
			}
			return fmt.Errorf("autoscaler ServiceAccount %s: %w", key, err)
		}
	} else if err := r.createOnce(ctx, s, builder.AutoscalerServiceAccount(rc), &corev1.ServiceAccount{}, constants.EventCreatedServiceAccount, constants.EventFailedToCreateServiceAccount); err != nil {
		return err
	}
	if err := r.createOnce(ctx, s, builder.AutoscalerRole(rc), &rbacv1.Role{}, constants.EventCreatedRole, constants.EventFailedToCreateRole); err != nil {
		return err
	}
	return r.createOnce(ctx, s, builder.AutoscalerRoleBinding(rc), &rbacv1.RoleBinding{}, constants.EventCreatedRoleBinding, constants.EventFailedToCreateRoleBinding)
}

// reconcileHeadService creates the head Service once (KubeRay never updates it).
func (r *Reconciler) reconcileHeadService(ctx context.Context, s *state) error {
	return r.createOnce(ctx, s, builder.HeadService(s.rc, r.Options), &corev1.Service{}, constants.EventCreatedService, constants.EventFailedToCreateService)
}

// createOnce creates obj if missing and records a Normal event (created) on creation, a Warning (failed) on failure.
func (r *Reconciler) createOnce(ctx context.Context, s *state, obj, existing client.Object, created, failed string) error {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	made, err := r.createIfMissing(ctx, obj, existing)
	if err != nil {
		s.warn(failed, "Failed to create %s %s/%s: %v", kind, obj.GetNamespace(), obj.GetName(), err)
		return fmt.Errorf("create %s %s: %w", kind, obj.GetName(), err)
	}
	if made {
		s.normal(created, "Created %s %s/%s", kind, obj.GetNamespace(), obj.GetName())
	}
	return nil
}

// reconcileHeadStatefulSet creates the head Advanced StatefulSet, and updates it when its template, strategy
// or replicas (suspend) changed. Kruise replaces a failed or evicted head pod with one of the same name.
func (r *Reconciler) reconcileHeadStatefulSet(ctx context.Context, s *state) error {
	desired := builder.HeadStatefulSet(s.effective, r.Options)
	live := &kruisev1beta1.StatefulSet{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(desired), live)
	if apierrors.IsNotFound(err) {
		if err := ignoreAlreadyExists(r.Client.Create(ctx, desired)); err != nil {
			s.warn(constants.EventFailedToWriteWorkload, "Failed to create head StatefulSet %s: %v", desired.Name, err)
			return fmt.Errorf("create head StatefulSet %s: %w", desired.Name, err)
		}
		s.normal(constants.EventCreatedHeadStatefulSet, "Created head Advanced StatefulSet %s/%s", desired.Namespace, desired.Name)
		return nil
	}
	if err != nil {
		return err
	}
	if !ownedBy(live, s.rc) {
		return notOwnedError("StatefulSet", live.Name)
	}
	s.holdRolloutUnless(status.HeadSetUpdated(live), live, desired)
	if !headSetDiffers(live, desired) {
		return nil
	}
	_, err = r.updateFresh(ctx, client.ObjectKeyFromObject(desired), live, func() (bool, error) {
		if !headSetDiffers(live, desired) {
			return false, nil
		}
		live.Spec.Replicas = desired.Spec.Replicas
		live.Spec.Template = desired.Spec.Template
		live.Spec.UpdateStrategy = desired.Spec.UpdateStrategy
		setAnnotation(live, constants.AnnotationSpecHash, desired.Annotations[constants.AnnotationSpecHash])
		return true, nil
	})
	if err != nil {
		s.warn(constants.EventFailedToWriteWorkload, "Failed to update head StatefulSet %s: %v", desired.Name, err)
		return fmt.Errorf("update head StatefulSet %s: %w", desired.Name, err)
	}
	s.normal(constants.EventUpdatedWorkload, "Updated head Advanced StatefulSet %s/%s (replicas %d)", desired.Namespace, desired.Name, ptr.Deref(desired.Spec.Replicas, 0))
	return nil
}

func headSetDiffers(live, desired *kruisev1beta1.StatefulSet) bool {
	return ptr.Deref(live.Spec.Replicas, -1) != ptr.Deref(desired.Spec.Replicas, 0) ||
		live.Annotations[constants.AnnotationSpecHash] != desired.Annotations[constants.AnnotationSpecHash]
}

func setAnnotation(obj client.Object, key, value string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	obj.SetAnnotations(a)
}
