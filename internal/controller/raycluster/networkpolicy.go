package raycluster

import (
	"context"
	"errors"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
)

// reconcileNetworkPolicies keeps the NetworkPolicies of spec.networkPolicy (builder.NetworkPolicies): each is
// created, or brought back to the spec when its spec or kray's labels changed, and every NetworkPolicy the
// RayCluster controls that is no longer asked for (a removed worker group, a removed networkPolicy) is
// deleted. A NetworkPolicy of that name that the RayCluster does not control is left alone and reported.
func (r *Reconciler) reconcileNetworkPolicies(ctx context.Context, s *state) error {
	desired := builder.NetworkPolicies(s.effective, r.Options)
	want := map[string]bool{}
	var errs []error
	for _, d := range desired {
		want[d.Name] = true
		if err := r.reconcileNetworkPolicy(ctx, s, d); err != nil {
			errs = append(errs, err)
		}
	}
	live := &networkingv1.NetworkPolicyList{}
	if err := r.Cache.List(ctx, live, client.InNamespace(s.rc.Namespace), client.MatchingLabels{constants.LabelCluster: s.rc.Name}); err != nil {
		return errors.Join(append(errs, fmt.Errorf("list NetworkPolicies: %w", err))...)
	}
	for i := range live.Items {
		p := &live.Items[i]
		if want[p.Name] {
			continue
		}
		if err := r.deleteUnwanted(ctx, s, p.DeepCopy(), "NetworkPolicy", EventDeletedNetworkPolicy, EventFailedToDeleteNetworkPolicy,
			"the RayCluster no longer asks for it (spec.networkPolicy)"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// reconcileNetworkPolicy creates desired, or updates the one the RayCluster controls to it.
func (r *Reconciler) reconcileNetworkPolicy(ctx context.Context, s *state, desired *networkingv1.NetworkPolicy) error {
	live := &networkingv1.NetworkPolicy{}
	made, err := r.createIfMissing(ctx, desired, live)
	switch {
	case err != nil:
		s.warn(EventFailedToCreateNetworkPolicy, "Failed to create NetworkPolicy %s/%s: %v", desired.Namespace, desired.Name, err)
		return fmt.Errorf("create NetworkPolicy %s: %w", desired.Name, err)
	case made:
		s.normal(EventCreatedNetworkPolicy, "Created NetworkPolicy %s/%s", desired.Namespace, desired.Name)
		return nil
	case !ownedBy(live, s.rc):
		s.warn(EventNetworkPolicyNameCollision, "NetworkPolicy %s/%s already exists and is not owned by this RayCluster, network isolation will not be applied. "+
			"Rename the existing NetworkPolicy or use a different RayCluster name to avoid the collision", desired.Namespace, desired.Name)
		return notOwnedError("NetworkPolicy", desired.Name)
	case equality.Semantic.DeepEqual(live.Spec, desired.Spec) && hasAll(live.Labels, desired.Labels):
		return nil
	}
	updated := live.DeepCopy()
	updated.Spec = desired.Spec
	updated.Labels = withAll(updated.Labels, desired.Labels)
	if err := r.Writer.Update(ctx, updated); err != nil {
		s.warn(EventFailedToUpdateNetworkPolicy, "Failed to update NetworkPolicy %s/%s: %v", live.Namespace, live.Name, err)
		return fmt.Errorf("update NetworkPolicy %s: %w", live.Name, err)
	}
	s.normal(EventUpdatedNetworkPolicy, "Updated NetworkPolicy %s/%s", live.Namespace, live.Name)
	return nil
}
