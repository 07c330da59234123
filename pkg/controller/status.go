package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/metrics"
	"github.com/kray-project/kray/pkg/status"
)

// errStatusConflict reports that the status write lost a race; the reconcile is requeued because a status-only
// change of the RayCluster (its own write included) does not trigger one.
var errStatusConflict = errors.New("status write conflict")

// progressWriteInterval is the least time between two status writes when the second one would only change
// the worker counts (status.ProgressOnly): the workers of a cluster coming up together cost one write, not
// one per batch of pods. A change of state or condition is never delayed.
const progressWriteInterval = 2 * time.Second

// writeStatus computes the status from the reconcile's children and writes it only if it changed, spacing
// out writes that only change the worker counts (progressWriteInterval). Events about status transitions are
// queued once the write succeeded.
func (r *Reconciler) writeStatus(ctx context.Context, s *state, obs status.Observed) error {
	rc := s.rc
	obs.Pods, obs.CloneSets = s.children.pods, s.children.cloneSets
	obs.HeadSet, obs.HeadService = s.children.headSet, s.children.headService
	obs.Now = r.now()
	updated := status.Compute(rc, obs)
	metrics.ObserveCluster(rc.Namespace, rc.Name, string(updated.State), len(obs.Pods))
	if !status.NeedsWrite(rc.Status, updated) {
		return nil
	}
	if last := rc.Status.LastUpdateTime; last != nil && status.ProgressOnly(rc.Status, updated) {
		if wait := progressWriteInterval - obs.Now.Sub(last.Time); wait > 0 {
			s.retryAfter(wait)
			return nil
		}
	}
	cp := rc.DeepCopy()
	cp.Status = updated
	if err := r.Writer.UpdateStatus(ctx, cp); err != nil {
		if apierrors.IsConflict(err) {
			return errStatusConflict
		}
		return fmt.Errorf("write status: %w", err)
	}
	transitions(s, rc.Status, updated)
	if updated.State == rayv1.Ready && rc.Status.StateTransitionTimes[rayv1.Ready] == nil {
		metrics.ObserveFirstReady(obs.Now.Sub(rc.CreationTimestamp.Time))
	}
	return nil
}

// transitions queues events for condition changes users should see in `kubectl describe`.
func transitions(s *state, old, updated rayv1.RayClusterStatus) {
	failure := string(rayv1.RayClusterReplicaFailure)
	if c := meta.FindStatusCondition(updated.Conditions, failure); c != nil && c.Status == "True" && !meta.IsStatusConditionTrue(old.Conditions, failure) {
		reason := constants.EventFailedCreateWorkerPod
		if c.Reason == constants.ReasonFailedCreateHeadPod {
			reason = constants.EventFailedCreateHeadPod
		}
		s.warn(reason, "%s", c.Message)
	}
	suspended := string(rayv1.RayClusterSuspended)
	if meta.IsStatusConditionTrue(updated.Conditions, string(rayv1.RayClusterSuspending)) && !meta.IsStatusConditionTrue(old.Conditions, string(rayv1.RayClusterSuspending)) {
		s.normal(constants.EventSuspending, "Suspending: scaling the head StatefulSet and every worker CloneSet to 0")
	}
	if meta.IsStatusConditionTrue(updated.Conditions, suspended) && !meta.IsStatusConditionTrue(old.Conditions, suspended) {
		s.normal(constants.EventSuspended, "Suspended: all Ray pods are gone")
	}
}
