package raycluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/spec"
)

// reconcileAutoscalerRBAC creates the autoscaler's ServiceAccount, Role and RoleBinding once. A
// ServiceAccount the head template names must already exist: kray does not create the user's account.
func (r *Reconciler) reconcileAutoscalerRBAC(ctx context.Context, s *state) error {
	rc := s.effective
	if !spec.AutoscalingEnabled(rc) {
		return nil
	}
	if spec.UserServiceAccount(rc) {
		sa := &corev1.ServiceAccount{}
		key := types.NamespacedName{Namespace: rc.Namespace, Name: names.AutoscalerServiceAccountFor(rc)}
		if err := r.APIReader.Get(ctx, key, sa); err != nil {
			if apierrors.IsNotFound(err) {
				s.warn(EventAutoscalerSANotFound, "ServiceAccount %s, named by the head template, does not exist; create it for the autoscaler", key)
			}
			return fmt.Errorf("autoscaler ServiceAccount %s: %w", key, err)
		}
	} else if err := r.createOnce(ctx, s, builder.AutoscalerServiceAccount(rc), &corev1.ServiceAccount{}, EventCreatedServiceAccount, EventFailedToCreateServiceAccount); err != nil {
		return err
	}
	if err := r.createOnce(ctx, s, builder.AutoscalerRole(rc), &rbacv1.Role{}, EventCreatedRole, EventFailedToCreateRole); err != nil {
		return err
	}
	return r.createOnce(ctx, s, builder.AutoscalerRoleBinding(rc), &rbacv1.RoleBinding{}, EventCreatedRoleBinding, EventFailedToCreateRoleBinding)
}
