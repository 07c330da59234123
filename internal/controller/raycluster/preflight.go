package raycluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/pkg/builder"
)

// errRejected marks a spec that the API server or Kruise's webhooks refuse: a spec problem, not an outage.
type errRejected struct{ err error }

func (e errRejected) Error() string { return e.err.Error() }
func (e errRejected) Unwrap() error { return e.err }

// preflightNewCluster dry-runs the head Advanced StatefulSet and every worker CloneSet of a cluster that
// has no head workload yet, so that a template Kubernetes or Kruise rejects (the CRD embeds pod templates
// without their full validation) creates nothing at all instead of a head without workers. The dry-runs go
// out together (each waits on Kruise's admission webhooks) and the first failure in that order is returned.
func (r *Reconciler) preflightNewCluster(ctx context.Context, s *state) error {
	if s.children.headSet != nil {
		return nil
	}
	head := builder.HeadStatefulSet(s.effective, s.options)
	objs := []client.Object{head}
	for i := range s.effective.Spec.WorkerGroupSpecs {
		objs = append(objs, builder.WorkerCloneSet(s.effective, &s.effective.Spec.WorkerGroupSpecs[i], s.options, false))
	}
	errs := make([]error, len(objs))
	var wg sync.WaitGroup
	for i, obj := range objs {
		wg.Go(func() { errs[i] = r.dryRunCreate(ctx, obj) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// dryRunCreate dry-runs obj's creation; an object that already exists passes.
func (r *Reconciler) dryRunCreate(ctx context.Context, obj client.Object) error {
	err := r.Writer.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return nil
	case rejection(err):
		return errRejected{fmt.Errorf("%s %s would be rejected: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)}
	default:
		return fmt.Errorf("dry-run %s: %w", obj.GetName(), err)
	}
}

// rejection reports whether err refuses the object itself (invalid, or denied by an admission webhook),
// as opposed to an unreachable webhook or a missing permission.
func rejection(err error) bool {
	return apierrors.IsInvalid(err) || (apierrors.IsForbidden(err) && strings.Contains(err.Error(), "denied the request"))
}

func isRejected(err error) bool {
	var r errRejected
	return errors.As(err, &r)
}
