package raycluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/builder"
)

// reconcileHeadService creates the head Service once (KubeRay never updates it).
func (r *Reconciler) reconcileHeadService(ctx context.Context, s *state) error {
	if s.children.headService != nil {
		return nil
	}
	return r.createOnce(ctx, s, builder.HeadService(s.effective, r.Options), &corev1.Service{}, shared.EventCreatedService, shared.EventFailedToCreateService)
}

// reconcileHeadlessWorkerService creates, once, the headless Service through which the hosts of multi-host
// replicas reach each other, when some group has numOfHosts above 1.
func (r *Reconciler) reconcileHeadlessWorkerService(ctx context.Context, s *state) error {
	svc := builder.HeadlessWorkerService(s.effective)
	if svc == nil {
		return nil
	}
	return r.createOnce(ctx, s, svc, &corev1.Service{}, shared.EventCreatedService, shared.EventFailedToCreateService)
}

// reconcileServeService creates the serve Service once when the cluster asks for it.
func (r *Reconciler) reconcileServeService(ctx context.Context, s *state) error {
	svc := builder.ServeService(s.effective)
	if svc == nil {
		return nil
	}
	return r.createOnce(ctx, s, svc, &corev1.Service{}, shared.EventCreatedService, shared.EventFailedToCreateService)
}
