package raycluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/metrics"
	"github.com/kray-project/kray/pkg/status"
)

// errStatusConflict reports that the status write lost a race; the reconcile is requeued because a status-only
// change of the RayCluster (its own write included) does not trigger one.
var errStatusConflict = errors.New("status write conflict")

// progressWriteInterval is how long a status change that only moves pod counts (status.ProgressOnly) waits
// before it is written, so that the pods of a cluster coming up or going away together cost one write, not
// one per batch of pods. A change of state or condition is written at once, with the counts it carries.
const progressWriteInterval = 2 * time.Second

// firstProvisionWriteInterval replaces progressWriteInterval until the cluster is provisioned for the first
// time (RayClusterProvisioned True), which is written at once: Kruise creates a new cluster's pods over
// several seconds under load, and nobody waits on the counts of a cluster that is not ready yet; the status
// writes it saves in bulk creation are measured in docs/benchmarks.md.
const firstProvisionWriteInterval = 5 * time.Second

// heldProgress remembers, per RayCluster, since when a pod-count-only status change has been held back.
type heldProgress struct{ since sync.Map }

// wait returns how much longer the held change of key must wait to have waited interval, starting its wait
// at now if it had none.
func (h *heldProgress) wait(key types.NamespacedName, now time.Time, interval time.Duration) time.Duration {
	since, _ := h.since.LoadOrStore(key, now)
	return interval - now.Sub(since.(time.Time))
}

// progressInterval is how long a progress-only change of a cluster whose written status is st may wait.
func progressInterval(st rayv1.RayClusterStatus) time.Duration {
	if meta.IsStatusConditionTrue(st.Conditions, string(rayv1.RayClusterProvisioned)) {
		return progressWriteInterval
	}
	return firstProvisionWriteInterval
}

// forget drops key's held change: it was written, superseded, or the cluster is gone.
func (h *heldProgress) forget(key types.NamespacedName) { h.since.Delete(key) }

// writeStatus computes the status from the reconcile's children and writes it only if it changed, holding a
// change of pod counts alone for progressWriteInterval. Events about status transitions are queued once the
// write succeeded.
func (r *Reconciler) writeStatus(ctx context.Context, s *state, obs status.Observed) error {
	rc := s.rc
	key := client.ObjectKeyFromObject(rc)
	obs.Pods, obs.CloneSets = s.children.pods, s.children.cloneSets
	obs.HeadSet, obs.HeadService = s.children.headSet, s.children.headService
	obs.Now = r.now()
	obs.BatchScheduler = s.options.Scheduling.Scheduler
	obs.GCSPaused = r.gcs.paused(key, obs.Now.Time)
	obs.RestartingWorkers = s.restarting
	obs.NotJoiningWorkers = s.notJoining
	updated := status.Compute(rc, obs)
	metrics.ObserveCluster(rc.Namespace, rc.Name, string(updated.State), len(obs.Pods))
	if !status.NeedsWrite(rc.Status, updated) {
		r.progress.forget(key)
		return nil
	}
	if status.ProgressOnly(rc.Status, updated) {
		if wait := r.progress.wait(key, r.clock(), progressInterval(rc.Status)); wait > 0 {
			s.retryAfter(wait)
			return nil
		}
	}
	// The write sends the status and the resourceVersion it was computed from, nothing else of rc.
	written := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{
		Namespace: rc.Namespace, Name: rc.Name, UID: rc.UID, ResourceVersion: rc.ResourceVersion}, Status: updated}
	if err := r.Writer.UpdateStatus(ctx, written); err != nil {
		if apierrors.IsConflict(err) {
			return errStatusConflict
		}
		return fmt.Errorf("write status: %w", err)
	}
	r.progress.forget(key)
	transitions(s, rc.Status, updated)
	metrics.ObserveProvisioned(rc, rc.Status, updated, obs.Now.Time)
	if updated.State == rayv1.Ready && rc.Status.StateTransitionTimes[rayv1.Ready] == nil {
		metrics.ObserveFirstReady(obs.Now.Sub(rc.CreationTimestamp.Time))
	}
	return nil
}

// transitions queues events for condition changes users should see in `kubectl describe`.
func transitions(s *state, old, updated rayv1.RayClusterStatus) {
	failure := string(rayv1.RayClusterReplicaFailure)
	if c := meta.FindStatusCondition(updated.Conditions, failure); c != nil && c.Status == "True" && !meta.IsStatusConditionTrue(old.Conditions, failure) {
		reason := EventFailedCreateWorkerPod
		if c.Reason == constants.ReasonFailedCreateHeadPod {
			reason = EventFailedCreateHeadPod
		}
		s.warn(reason, "%s", c.Message)
	}
	suspended := string(rayv1.RayClusterSuspended)
	if meta.IsStatusConditionTrue(updated.Conditions, string(rayv1.RayClusterSuspending)) && !meta.IsStatusConditionTrue(old.Conditions, string(rayv1.RayClusterSuspending)) {
		s.normal(EventSuspending, "Suspending: scaling the head StatefulSet and every worker CloneSet to 0")
	}
	if meta.IsStatusConditionTrue(updated.Conditions, suspended) && !meta.IsStatusConditionTrue(old.Conditions, suspended) {
		s.normal(EventSuspended, "Suspended: all Ray pods are gone")
	}
}
