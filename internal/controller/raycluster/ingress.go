package raycluster

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/kray-project/kray/pkg/builder"
)

// reconcileIngress creates the head Ingress when enableIngress is set, and brings an Ingress kray owns back
// to the spec (KubeRay updates it in place).
func (r *Reconciler) reconcileIngress(ctx context.Context, s *state) error {
	desired := builder.HeadIngress(s.effective, r.Options)
	if desired == nil {
		return nil
	}
	live := &networkingv1.Ingress{}
	if err := r.createOnce(ctx, s, desired, live, EventCreatedIngress, EventFailedToCreateIngress); err != nil || live.UID == "" {
		return err
	}
	if equality.Semantic.DeepEqual(live.Spec, desired.Spec) && hasAll(live.Annotations, desired.Annotations) {
		return nil
	}
	// Annotations that others (an ingress controller) add are kept; kray's own are brought back.
	live.Spec = desired.Spec
	live.Annotations = withAll(live.Annotations, desired.Annotations)
	if err := r.Writer.Update(ctx, live); err != nil {
		s.warn(EventFailedToUpdateIngress, "Failed to update Ingress %s/%s: %v", live.Namespace, live.Name, err)
		return fmt.Errorf("update Ingress %s: %w", live.Name, err)
	}
	s.normal(EventUpdatedIngress, "Updated Ingress %s/%s", live.Namespace, live.Name)
	return nil
}

// withAll is got with every key of want set to want's value (a new map when got is nil and want is not empty).
func withAll(got, want map[string]string) map[string]string {
	for k, v := range want {
		if got == nil {
			got = map[string]string{}
		}
		got[k] = v
	}
	return got
}

// hasAll reports whether got holds every key of want with the same value.
func hasAll(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
