// Package controller is kray's RayCluster reconciler: it loads a RayCluster, runs a fixed list of phases
// that write Kruise workloads and their companions, and writes the status once.
package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/metrics"
	"github.com/kray-project/kray/pkg/ray"
	"github.com/kray-project/kray/pkg/status"
	"github.com/kray-project/kray/pkg/validation"
)

// Reconciler reconciles RayClusters into Kruise workloads.
type Reconciler struct {
	// Client reads from the informer cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server directly; used where a stale read could delete the wrong pod.
	APIReader client.Reader
	Recorder  record.EventRecorder
	Options   builder.Options
	// Now returns the current time; tests may pin it.
	Now func() time.Time
	// Ray dials Ray GCS servers to drain worker nodes; nil releases pods without draining.
	Ray ray.Dialer
	// RayGCSAddress, when set, is the GCS address of every cluster instead of its head Service (an operator
	// outside the cluster network).
	RayGCSAddress string

	// ResyncPeriod is how often a settled RayCluster is reconciled without an event; 0 means 5 minutes.
	ResyncPeriod time.Duration
	// ReplicaIndexing labels worker pods with their replica index and keeps multi-host replicas whole
	// (KubeRay's RayMultiHostIndexing).
	ReplicaIndexing bool
	// DisableRedisCleanup leaves Redis GCS fault tolerant clusters without the cleanup finalizer (KubeRay's
	// ENABLE_GCS_FT_REDIS_CLEANUP=false).
	DisableRedisCleanup bool

	// createdSecrets remembers the auth Secrets known to exist (kray cannot read Secrets).
	createdSecrets sync.Map
}

// phase is one named step of a reconcile. It may append events to be emitted after the status write.
type phase struct {
	name string
	run  func(ctx context.Context, s *state) error
}

// state is what the phases of one reconcile share.
type state struct {
	rc *rayv1.RayCluster
	// effective is rc with spec.suspend forced on while a suspension is completing; builders read it.
	effective *rayv1.RayCluster
	// rolloutHeld is set while a RollingUpdate is still updating an earlier group (the head, or a worker group
	// before the current one): later groups keep their update paused, so groups update one at a time.
	rolloutHeld bool
	// requeueAfter, when set, asks for the next reconcile sooner than the resync (a drain being waited for).
	requeueAfter time.Duration
	events       []queuedEvent
}

// holdRolloutUnless holds later groups of a RollingUpdate unless this workload is done: its pods are
// updated (Kruise's status says so) and kray is not changing its spec in this reconcile.
func (s *state) holdRolloutUnless(updated bool, live, desired client.Object) {
	if builder.Rolling(s.effective) && (!updated || live.GetAnnotations()[constants.AnnotationSpecHash] != desired.GetAnnotations()[constants.AnnotationSpecHash]) {
		s.rolloutHeld = true
	}
}

// retryAfter asks for a reconcile within d.
func (s *state) retryAfter(d time.Duration) {
	d = max(d, 100*time.Millisecond)
	if s.requeueAfter == 0 || d < s.requeueAfter {
		s.requeueAfter = d
	}
}

type queuedEvent struct {
	warning bool
	reason  string
	message string
}

func (s *state) normal(reason, format string, args ...any) {
	s.events = append(s.events, queuedEvent{reason: reason, message: fmt.Sprintf(format, args...)})
}

func (s *state) warn(reason, format string, args ...any) {
	s.events = append(s.events, queuedEvent{warning: true, reason: reason, message: fmt.Sprintf(format, args...)})
}

func (r *Reconciler) phases() []phase {
	return []phase{
		{"preflight", r.preflightNewCluster},
		{"autoscaler-rbac", r.reconcileAutoscalerRBAC},
		{"ingress", r.reconcileIngress},
		{"auth-secret", r.reconcileAuthSecret},
		{"head-service", r.reconcileHeadService},
		{"headless-worker-service", r.reconcileHeadlessWorkerService},
		{"serve-service", r.reconcileServeService},
		{"gcs-pvc", r.reconcileGCSStoragePVC},
		{"head-statefulset", r.reconcileHeadStatefulSet},
		{"worker-clonesets", r.reconcileWorkerGroups},
		{"replica-labels", r.reconcileReplicaLabels},
		{"worker-drain", r.reconcileDrains},
		{"pod-hygiene", r.reconcilePodHygiene},
	}
}

// Reconcile brings one RayCluster's Kruise workloads to its spec and writes its status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rc := &rayv1.RayCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, rc); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.Forget(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !managedByKray(rc) {
		return ctrl.Result{}, nil
	}
	if rc.DeletionTimestamp != nil {
		return r.finalize(ctx, rc)
	}
	s := &state{rc: rc, effective: effectiveCluster(rc)}
	obs := status.Observed{}
	if err := validation.Metadata(rc); err != nil {
		obs.InvalidSpec, obs.InvalidReason = err, constants.ReasonInvalidMetadata
		s.warn(constants.EventInvalidMetadata, "The RayCluster metadata is invalid %s/%s: %v", rc.Namespace, rc.Name, err)
	} else if err := validation.Spec(rc); err != nil {
		obs.InvalidSpec, obs.InvalidReason = err, constants.ReasonInvalidSpec
		s.warn(constants.EventInvalidSpec, "The RayCluster spec is invalid %s/%s: %v", rc.Namespace, rc.Name, err)
	}
	var syncErr error
	if obs.InvalidSpec == nil {
		// The finalizer comes first, before anything that holds Redis data exists.
		// A finalizer write changes no generation, so the reconcile that creates the rest is requeued.
		switch wrote, err := r.ensureFinalizer(ctx, rc); {
		case err != nil:
			return ctrl.Result{}, err
		case wrote:
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		for _, w := range validation.Warnings(rc) {
			s.warn(w.Reason, "%s", w.Message)
		}
		for _, p := range r.phases() {
			start := time.Now()
			err := p.run(ctx, s)
			metrics.ObservePhase(p.name, time.Since(start), err)
			if err != nil {
				syncErr = fmt.Errorf("phase %s: %w", p.name, err)
				break
			}
		}
	}
	if isRejected(syncErr) {
		obs.InvalidSpec, obs.InvalidReason, syncErr = syncErr, constants.ReasonRejectedByAdmission, nil
		s.warn(constants.EventInvalidSpec, "The RayCluster spec is invalid %s/%s: %v", rc.Namespace, rc.Name, obs.InvalidSpec)
	}
	obs.SyncError = syncErr
	statusErr := r.writeStatus(ctx, s, obs)
	r.emit(s)
	if errors.Is(statusErr, errStatusConflict) {
		return ctrl.Result{RequeueAfter: conflictRetry}, syncErr
	}
	if syncErr != nil || statusErr != nil {
		return ctrl.Result{}, errors.Join(syncErr, statusErr)
	}
	// An invalid spec is reported, not retried: the next spec change triggers a new reconcile. A valid one
	// is re-checked periodically as a safety net; watches drive every normal change.
	if obs.InvalidSpec != nil {
		return ctrl.Result{}, nil
	}
	if s.requeueAfter > 0 {
		return ctrl.Result{RequeueAfter: s.requeueAfter}, nil
	}
	if r.ResyncPeriod > 0 {
		return ctrl.Result{RequeueAfter: r.ResyncPeriod}, nil
	}
	return ctrl.Result{RequeueAfter: resyncPeriod}, nil
}

// conflictRetry is the delay before recomputing a status whose write lost a race; the cache has usually
// caught up by then.
const conflictRetry = 200 * time.Millisecond

// resyncPeriod is how often a settled RayCluster is reconciled without any event, unless ResyncPeriod says
// otherwise (KubeRay's default).
const resyncPeriod = 5 * time.Minute

// managedByKray reports whether spec.managedBy leaves the object to kray (unset or KubeRay's value).
func managedByKray(rc *rayv1.RayCluster) bool {
	return rc.Spec.ManagedBy == nil || *rc.Spec.ManagedBy == rayv1.KubeRayOperatorManagedBy
}

// effectiveCluster returns rc, or a copy with spec.suspend on while a started suspension completes.
func effectiveCluster(rc *rayv1.RayCluster) *rayv1.RayCluster {
	if builder.ClusterSuspended(rc) || !status.EffectiveSuspend(rc) {
		return rc
	}
	cp := rc.DeepCopy()
	on := true
	cp.Spec.Suspend = &on
	return cp
}

func (r *Reconciler) emit(s *state) {
	for _, e := range s.events {
		kind := corev1.EventTypeNormal
		if e.warning {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Event(s.rc, kind, e.reason, e.message)
	}
}

func (r *Reconciler) now() metav1.Time {
	if r.Now != nil {
		return metav1.NewTime(r.Now().UTC().Truncate(time.Second))
	}
	return metav1.NewTime(time.Now().UTC().Truncate(time.Second))
}

// ignoreAlreadyExists treats a lost create race as success: the object exists, which is what was wanted.
func ignoreAlreadyExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
