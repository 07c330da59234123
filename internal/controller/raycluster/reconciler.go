// Package raycluster is kray's RayCluster reconciler: it loads a RayCluster and its children once, runs a
// fixed list of phases that write Kruise workloads and their companions, and writes the status once.
package raycluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/apierror"
	"github.com/kray-project/kray/pkg/batchscheduler"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/metrics"
	"github.com/kray-project/kray/pkg/ray"
	"github.com/kray-project/kray/pkg/spec"
	"github.com/kray-project/kray/pkg/status"
	"github.com/kray-project/kray/pkg/validation"
)

// Reconciler reconciles RayClusters into Kruise workloads.
type Reconciler struct {
	// Cache reads from the informer cache.
	Cache client.Reader
	// APIReader reads from the API server directly; used only where a stale read could name the wrong pod or
	// ask Ray twice to drain a node.
	APIReader client.Reader
	// Writer makes every write.
	Writer shared.Writer
	// Events records events, each repetition once per window.
	Events  shared.Events
	Options builder.Options
	// Clock is the reconciler's time; nil is the wall clock.
	Clock clock.PassiveClock
	// Ray dials Ray GCS servers to drain worker nodes; nil releases pods without draining.
	Ray ray.Dialer
	// RayGCSAddress, when set, is the GCS address of every cluster instead of its head Service (an operator
	// outside the cluster network).
	RayGCSAddress string

	// HealGrace is how long a worker run kray saw start while its cluster's GCS answered may stay out of that
	// GCS before kray restarts it; 0 is membership.DefaultGrace.
	HealGrace time.Duration

	// ResyncPeriod is how often a settled RayCluster is reconciled without an event; 0 means 5 minutes.
	ResyncPeriod time.Duration
	// ReplicaIndexing labels the workers of single-host groups with their replica index too (KubeRay's
	// RayMultiHostIndexing); multi-host groups are always labelled and kept whole.
	ReplicaIndexing bool
	// Validation are the operator settings a spec is checked with (the feature gates).
	Validation validation.ClusterOptions
	// DisableRedisCleanup leaves Redis GCS fault tolerant clusters without the cleanup finalizer (KubeRay's
	// ENABLE_GCS_FT_REDIS_CLEANUP=false).
	DisableRedisCleanup bool
	// BatchScheduler is the batch scheduler new clusters' pods go to (KubeRay's --batch-scheduler), "" for
	// Kubernetes' default scheduler. A cluster keeps the scheduling its workloads were created with.
	BatchScheduler string
	// NetworkPolicies serves spec.networkPolicy (KubeRay's RayClusterNetworkPolicy gate): the network-policies
	// phase runs and the NetworkPolicies the RayClusters control are watched. Off, neither happens, and
	// validation refuses the field.
	NetworkPolicies bool
	// MTLS serves spec.tlsOptions (KubeRay's RayClusterMTLS gate, with cert-manager's API served): the
	// tls-certificates phase runs and the Issuers and Certificates the RayClusters control are watched.
	MTLS bool

	// createdSecrets remembers, by RayCluster, the auth Secret known to exist ("<cluster UID>/<Secret name>"):
	// kray does not watch Secrets. A deleted RayCluster's entry goes with it.
	createdSecrets sync.Map
	// heal is what worker healing observed of each cluster's membership.
	heal healMemory
	// ownedSecrets remembers the certificate Secrets that carry their Certificate's owner reference (Secret
	// to Certificate UID): kray does not watch Secrets.
	ownedSecrets sync.Map
	// progress holds back status changes that only move pod counts (see writeStatus).
	progress heldProgress
	// gcs pauses the calls to a cluster's GCS that keeps failing to answer.
	gcs gcsBreaker
}

// The phases, in the order they run. The Services and the Ingress come after the workloads, which need
// nothing of them, so that a new cluster creates its CloneSets and Services in one batch (see runPhases).
const (
	phaseExtensions       = "extension-annotations"
	phasePreflight        = "preflight"
	phaseAutoscalerRBAC   = "autoscaler-rbac"
	phaseAuthSecret       = "auth-secret"
	phaseGCSStorage       = "gcs-pvc"
	phasePodGroup         = "pod-group"
	phaseImagePrepull     = "image-prepull"
	phaseHeadStatefulSet  = "head-statefulset"
	phaseWorkerCloneSets  = "worker-clonesets"
	phaseIngress          = "ingress"
	phaseHeadPDB          = "head-disruption-budget"
	phaseHeadService      = "head-service"
	phaseHeadlessService  = "headless-worker-service"
	phaseServeService     = "serve-service"
	phaseNetworkPolicies  = "network-policies"
	phaseCertificates     = "tls-certificates"
	phaseCertSecrets      = "tls-secret-owners"
	phaseReplicaLabels    = "replica-labels"
	phaseWorkerDrain      = "worker-drain"
	phaseWorkerMembership = "worker-membership"
	phaseDeadPodsDeletion = "pod-hygiene"
)

// errNotYet is what a phase returns, wrapped, when what the phases that need it depend on is not there yet
// (a new cluster's certificates): they are skipped, and no failure is reported.
var errNotYet = errors.New("not yet")

// phase is one named step of a reconcile. It may queue events, to be emitted after the status write.
type phase struct {
	name string
	run  func(ctx context.Context, s *state) error
	// needs are earlier phases without whose success this one is skipped: the preflight for every phase that
	// creates objects (a new cluster whose templates are refused gets nothing at all), and what the pods of
	// the workload a phase writes refer to (a ServiceAccount, a Secret, a claim).
	needs []string
	// creates marks a phase that writes only objects of its own and reads nothing another phase leaves in
	// the state when the cluster is new (state.isNew): a new cluster's consecutive creates phases run at once
	// (see runPhases).
	creates bool
}

func (r *Reconciler) phases() []phase {
	pre := []string{phasePreflight}
	headNeeds := []string{phasePreflight, phaseAutoscalerRBAC, phaseAuthSecret, phaseGCSStorage}
	workerNeeds := []string{phasePreflight, phaseAuthSecret}
	var podGroup, companions []phase
	if r.NetworkPolicies {
		companions = []phase{{name: phaseNetworkPolicies, run: r.reconcileNetworkPolicies, needs: pre, creates: true}}
	}
	if r.MTLS {
		companions = append(companions, phase{name: phaseCertificates, run: r.reconcileCertificates, needs: pre, creates: true})
		headNeeds, workerNeeds = append(headNeeds, phaseCertificates), append(workerNeeds, phaseCertificates)
	}
	if batchscheduler.UsesPodGroups(r.BatchScheduler) {
		// A gang's PodGroup exists before any of its pods: a pod naming a missing PodGroup is refused at Permit.
		podGroup = []phase{{name: phasePodGroup, run: r.reconcilePodGroup, needs: pre, creates: true}}
		headNeeds, workerNeeds = append(headNeeds, phasePodGroup), append(workerNeeds, phasePodGroup)
	}
	return append(append([]phase{
		{name: phaseExtensions, run: r.keepExtensionAnnotations},
		{name: phasePreflight, run: r.preflightNewCluster},
		{name: phaseAutoscalerRBAC, run: r.reconcileAutoscalerRBAC, needs: pre, creates: true},
		{name: phaseAuthSecret, run: r.reconcileAuthSecret, needs: pre, creates: true},
		{name: phaseGCSStorage, run: r.reconcileGCSStoragePVC, needs: pre, creates: true},
	}, append(companions, podGroup...)...), []phase{
		{name: phaseImagePrepull, run: r.reconcileImagePrepull, needs: pre, creates: true},
		{name: phaseHeadStatefulSet, run: r.reconcileHeadStatefulSet, needs: headNeeds},
		{name: phaseWorkerCloneSets, run: r.reconcileWorkerGroups, needs: workerNeeds, creates: true},
		{name: phaseIngress, run: r.reconcileIngress, needs: pre, creates: true},
		{name: phaseHeadPDB, run: r.reconcileHeadDisruptionBudget, needs: pre, creates: true},
		{name: phaseHeadService, run: r.reconcileHeadService, needs: pre, creates: true},
		{name: phaseHeadlessService, run: r.reconcileHeadlessWorkerService, needs: pre, creates: true},
		{name: phaseServeService, run: r.reconcileServeService, needs: pre, creates: true},
		{name: phaseCertSecrets, run: r.reconcileCertificateSecrets, needs: pre},
		{name: phaseReplicaLabels, run: r.reconcileReplicaLabels},
		{name: phaseWorkerDrain, run: r.reconcileDrains},
		{name: phaseWorkerMembership, run: r.reconcileWorkerMembership},
		{name: phaseDeadPodsDeletion, run: r.deleteDeadPods},
	}...)
}

// Reconcile brings one RayCluster's Kruise workloads to its spec and writes its status once.
//
// Error and event policy: a failing phase does not stop the phases that do not need it (an Ingress the API
// server refuses never holds up the autoscaler's scale-down); their errors are joined, reported in the
// status and returned. Events about what this reconcile wrote are emitted whatever happens to the status
// write, because the writes happened; events about status transitions are queued only once the status
// write succeeded, so a write that conflicts and is repeated never announces a transition twice. Reconcile
// returns either a result or an error, never both.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rc := &rayv1.RayCluster{}
	if err := r.Cache.Get(ctx, req.NamespacedName, rc); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.Forget(req.Namespace, req.Name)
			r.progress.forget(req.NamespacedName)
			r.createdSecrets.Delete(req.NamespacedName)
			r.gcs.forget(req.NamespacedName)
			r.heal.forget(req.NamespacedName)
			r.forgetCertificateSecrets(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !managedByKray(rc) {
		return ctrl.Result{}, nil
	}
	if rc.DeletionTimestamp != nil {
		return r.finalize(ctx, rc)
	}
	kids, err := r.readChildren(ctx, rc)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("read the cluster's children: %w", err)
	}
	ext, extErr := spec.WithExtensions(rc)
	if extErr != nil {
		ext = rc
	}
	s := newState(rc, ext, kids)
	s.options = r.workloadOptions(s)
	obs := status.Observed{}
	if err := validation.Metadata(rc); err != nil {
		obs.InvalidSpec, obs.InvalidReason = err, constants.ReasonInvalidMetadata
		s.warn(EventInvalidMetadata, "The RayCluster metadata is invalid %s/%s: %v", rc.Namespace, rc.Name, err)
	} else if err := errors.Join(extErr, validation.SpecWith(ext, r.Validation)); err != nil {
		obs.InvalidSpec, obs.InvalidReason = err, constants.ReasonInvalidSpec
		s.warn(EventInvalidSpec, "The RayCluster spec is invalid %s/%s: %v", rc.Namespace, rc.Name, err)
	}
	if obs.InvalidSpec == nil {
		// The finalizer comes first, before anything that holds Redis data exists.
		// A finalizer write changes no generation, so the reconcile that creates the rest is requeued.
		switch wrote, err := r.ensureFinalizer(ctx, rc); {
		case apierror.NamespaceGoing(err):
			return ctrl.Result{}, nil
		case err != nil:
			return ctrl.Result{}, err
		case wrote:
			return ctrl.Result{RequeueAfter: shared.ConflictRetry}, nil
		}
		for _, w := range validation.Warnings(ext) {
			s.warn(w.Reason, "%s", w.Message)
		}
		errs := r.runPhases(ctx, s)
		if slices.ContainsFunc(errs, apierror.NamespaceGoing) {
			// Every write into the namespace fails and the cluster goes with it: nothing to report or retry.
			ctrl.LoggerFrom(ctx).V(1).Info("the RayCluster's namespace is being deleted or is gone; nothing more to do")
			return ctrl.Result{}, nil
		}
		rejected, failures := splitRejected(errs)
		if rejected != nil {
			obs.InvalidSpec, obs.InvalidReason = rejected, constants.ReasonRejectedByAdmission
			s.warn(EventInvalidSpec, "The RayCluster spec is invalid %s/%s: %v", rc.Namespace, rc.Name, rejected)
		}
		obs.SyncError = failures
	} else {
		obs.SyncError = r.drainWhileInvalid(ctx, s)
	}
	r.closeGCS(s)
	var statusErr error
	if !deferStatus(s, obs) {
		statusErr = r.writeStatus(ctx, s, obs)
	}
	r.emit(s)
	return r.result(s, obs, statusErr)
}

// deferStatus reports whether this reconcile leaves the status to the next one: it created a new cluster's
// workloads without an error, so what it read describes nothing that exists yet, and the creations' own watch
// events (the head StatefulSet's at least) reconcile the cluster again within the batching window. One
// status write saved per new cluster.
func deferStatus(s *state, obs status.Observed) bool {
	return s.createdHead && obs.SyncError == nil && obs.InvalidSpec == nil && len(s.rc.Status.Conditions) == 0
}

// runPhases runs every phase whose needs succeeded and returns each failing phase's error, wrapped with the
// phase's name. On a new cluster, consecutive creates phases run at once, up to the first that needs one of
// them: after the head StatefulSet, the CloneSets and the Services cost one round trip instead of one each.
// The head StatefulSet goes alone, first, so that Kruise starts the head before the workers: under a tight
// ResourceQuota, workers created first could take the room the head needs.
func (r *Reconciler) runPhases(ctx context.Context, s *state) []error {
	var errs []error
	all := r.phases()
	for len(all) > 0 {
		n := 1
		if s.isNew() && all[0].creates {
			for n < len(all) && all[n].creates && !needsAny(all[n], all[:n]) {
				n++
			}
		}
		errs = append(errs, r.runTogether(ctx, s, all[:n])...)
		all = all[n:]
	}
	return errs
}

// needsAny reports whether p needs one of the phases in ps.
func needsAny(p phase, ps []phase) bool {
	return slices.ContainsFunc(ps, func(q phase) bool { return slices.Contains(p.needs, q.name) })
}

// runTogether runs the phases of ps whose needs succeeded, at once when there are several (state.inCopies).
func (r *Reconciler) runTogether(ctx context.Context, s *state, ps []phase) []error {
	var runnable []phase
	for _, p := range ps {
		if slices.ContainsFunc(p.needs, func(n string) bool { return s.failed[n] }) {
			s.failed[p.name] = true
			continue
		}
		runnable = append(runnable, p)
	}
	var failures []error
	for i, err := range s.inCopies(len(runnable), func(i int, own *state) error { return r.runPhase(ctx, own, runnable[i]) }) {
		if err != nil {
			s.failed[runnable[i].name] = true
			if errors.Is(err, errNotYet) {
				continue // the phases that need it wait with it; nothing failed
			}
			failures = append(failures, fmt.Errorf("phase %s: %w", runnable[i].name, err))
		}
	}
	return failures
}

// runPhase runs p and records its duration and outcome.
func (r *Reconciler) runPhase(ctx context.Context, s *state, p phase) error {
	start := time.Now()
	err := p.run(ctx, s)
	metrics.ObservePhase(p.name, time.Since(start), err)
	return err
}

// splitRejected separates the errors that refuse the spec itself (admission) from the others, joining each.
func splitRejected(errs []error) (rejected, failures error) {
	var r, f []error
	for _, err := range errs {
		if isRejected(err) {
			r = append(r, err)
		} else {
			f = append(f, err)
		}
	}
	return errors.Join(r...), errors.Join(f...)
}

// result turns the outcome of a reconcile into what controller-runtime needs: an error (retried with
// backoff), or a result.
func (r *Reconciler) result(s *state, obs status.Observed, statusErr error) (ctrl.Result, error) {
	conflict := errors.Is(statusErr, errStatusConflict)
	switch {
	case obs.SyncError != nil || (statusErr != nil && !conflict):
		return ctrl.Result{}, errors.Join(obs.SyncError, statusErr)
	case conflict:
		return ctrl.Result{RequeueAfter: shared.ConflictRetry}, nil
	case obs.InvalidSpec != nil && s.requeueAfter > 0:
		return ctrl.Result{RequeueAfter: s.requeueAfter}, nil // pods held for a drain are looked at again
	case obs.InvalidSpec != nil:
		// An invalid spec is reported, not retried: the next spec change triggers a new reconcile.
		return ctrl.Result{}, nil
	case s.requeueAfter > 0:
		return ctrl.Result{RequeueAfter: s.requeueAfter}, nil
	case r.ResyncPeriod > 0:
		return ctrl.Result{RequeueAfter: r.ResyncPeriod}, nil
	}
	// A valid spec is re-checked periodically as a safety net; watches drive every normal change.
	return ctrl.Result{RequeueAfter: resyncPeriod}, nil
}

// resyncPeriod is how often a settled RayCluster is reconciled without any event, unless ResyncPeriod says
// otherwise (KubeRay's default).
const resyncPeriod = 5 * time.Minute

// managedByKray reports whether spec.managedBy leaves the object to kray (unset or KubeRay's value).
func managedByKray(rc *rayv1.RayCluster) bool {
	return rc.Spec.ManagedBy == nil || *rc.Spec.ManagedBy == rayv1.KubeRayOperatorManagedBy
}

// now is the time written into the status, to the second.
func (r *Reconciler) now() metav1.Time {
	return metav1.NewTime(r.clock().UTC().Truncate(time.Second))
}

// clock is the current time on Clock.
func (r *Reconciler) clock() time.Time {
	return shared.Clock(r.Clock).Now()
}
