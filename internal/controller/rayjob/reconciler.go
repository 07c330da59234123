// Package rayjob is the RayJob controller: it creates (or selects) the RayCluster a Ray job runs on, submits
// the job through a submitter Job or the Ray dashboard's Job REST API, follows it to its end, and cleans up.
// Its state machine (Next) is a pure function; the Reconciler reads, acts and writes the status once.
package rayjob

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/apierror"
	"github.com/kray-project/kray/pkg/authtoken"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/dashboard"
	"github.com/kray-project/kray/pkg/metrics"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/validation"
)

// Reconciler reconciles RayJobs.
type Reconciler struct {
	// Cache reads RayJobs, RayClusters and submitter Jobs from the informer cache.
	Cache ctrl.Reader
	// APIReader reads the auth token Secret from the API server (kray caches no Secrets), an object whose
	// create found it existing, and a tearing-down attempt's cluster and submitter the cache does not show.
	APIReader ctrl.Reader
	Writer    shared.Writer
	// Events records events, each repetition once per window.
	Events shared.Events
	// Dashboards opens a cluster's dashboard Job API.
	Dashboards dashboard.Dialer
	// DashboardAddress, when set (http://host:port, with {namespace} and {cluster} replaced by the
	// cluster's), replaces every cluster's dashboard address for the operator's own calls, for an operator
	// outside the cluster network.
	DashboardAddress string
	Options          builder.Options
	// DeletionPolicy is the RayJobDeletionPolicy feature gate.
	DeletionPolicy bool
	// ClusterValidation are the operator settings a RayJob's cluster spec is checked with.
	ClusterValidation validation.ClusterOptions
	// DeleteRayJobOnShutdown and TransitionGracePeriod are KubeRay's DELETE_RAYJOB_CR_AFTER_JOB_FINISHES and
	// RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS (see Observed).
	DeleteRayJobOnShutdown bool
	TransitionGracePeriod  time.Duration
	// StatusCheckTimeout is KubeRay's RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS (see Observed).
	StatusCheckTimeout time.Duration
	// Clock is the reconciler's time; nil is the wall clock.
	Clock clock.PassiveClock
	// Suffix defaults to a 5-character random string.
	Suffix func() string

	// failures counts, per RayJob, the dashboard reads in a row that failed (Observed.DashboardFailures).
	failures shared.FailureCounts
}

// Reconcile moves one RayJob a step through its lifecycle.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	job := &rayv1.RayJob{}
	if err := r.Cache.Get(ctx, req.NamespacedName, job); err != nil {
		r.failures.Record(req.NamespacedName, false)
		if apierrors.IsNotFound(err) {
			metrics.ForgetJob(req.Namespace, req.Name)
		}
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	if m := job.Spec.ManagedBy; m != nil && *m != rayv1.KubeRayOperatorManagedBy {
		return reconcile.Result{}, nil
	}
	if job.DeletionTimestamp != nil {
		return reconcile.Result{}, r.finalize(ctx, job)
	}
	if job.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusNew && !controllerutil.ContainsFinalizer(job, constants.FinalizerRayJob) {
		// Added before anything exists that the finalizer must stop; the write wakes the next reconcile.
		_, err := shared.AddFinalizer(ctx, r.Writer, job, constants.FinalizerRayJob)
		return reconcile.Result{}, err
	}
	o, err := r.observe(ctx, job)
	if err != nil {
		return reconcile.Result{}, err
	}
	d := Next(o)
	// Events about the actions are recorded whatever happens to the status write, because the writes
	// happened; the decision's own events (a refused spec) only once the status that says so is stored.
	out := r.act(ctx, job, d)
	if apierror.NamespaceGoing(out.err) {
		// The RayJob goes with its namespace: nothing to report or retry.
		return reconcile.Result{}, nil
	}
	events, actErr := out.events, out.err
	if out.submitted && d.Status.JobStatus == rayv1.JobStatusNew {
		// Ray holds an accepted submission as PENDING; storing that makes a later 404 a lost job, never a
		// reason to submit again.
		d.Status.JobStatus = rayv1.JobStatusPending
	}
	if out.notStarted && job.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusInitializing &&
		d.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusRunning {
		// The submitter was not created: the attempt has not started, as KubeRay keeps it Initializing.
		d.Status.JobDeploymentStatus = rayv1.JobDeploymentStatusInitializing
		d.RequeueAfter = PollInterval
	}
	if out.conflict != nil {
		// Someone else's object holds a name the job needs: said once in an event, kept in the message.
		if job.Status.Message != out.conflict.Message {
			events = append(events, *out.conflict)
		}
		d.Status.Message = out.conflict.Message
	}
	res := reconcile.Result{RequeueAfter: d.RequeueAfter}
	statusStored := true
	if !equality.Semantic.DeepEqual(job.Status, d.Status) {
		updated := job.DeepCopy()
		updated.Status = d.Status
		switch err := r.Writer.UpdateStatus(ctx, updated); {
		case apierrors.IsConflict(err):
			statusStored = false
			res = reconcile.Result{RequeueAfter: shared.ConflictRetry} // a newer RayJob is on its way to the cache
		case err != nil:
			statusStored = false
			actErr = errors.Join(actErr, fmt.Errorf("write the RayJob status: %w", err))
		}
	}
	if statusStored {
		events = append(d.Events, events...)
		observeMetrics(job, d.Status, o.Now)
	}
	r.Events.Emit(job, o.Now, events...)
	if actErr != nil {
		return reconcile.Result{}, actErr
	}
	return res, nil
}

// observeMetrics records KubeRay's RayJob series for the status stored from job's: its deployment status and,
// when an attempt has just ended (a terminal status or Retrying), how long it ran.
func observeMetrics(job *rayv1.RayJob, stored rayv1.RayJobStatus, now time.Time) {
	uid := string(job.UID)
	metrics.ObserveJob(job.Namespace, job.Name, uid, string(stored.JobDeploymentStatus))
	before, after := job.Status.JobDeploymentStatus, stored.JobDeploymentStatus
	if rayv1.IsJobDeploymentTerminal(before) || (!rayv1.IsJobDeploymentTerminal(after) && after != rayv1.JobDeploymentStatusRetrying) ||
		before == after || stored.StartTime == nil {
		return
	}
	metrics.ObserveJobExecution(job.Namespace, job.Name, uid, string(after), int(ptr.Deref(job.Status.Failed, 0)), now.Sub(stored.StartTime.Time))
}

// observe reads what Next decides from: the cluster, the submitter and, while the job runs, the dashboard.
// A failed read of the dashboard is counted in o.DashboardFailures, and a successful one resets the count.
func (r *Reconciler) observe(ctx context.Context, job *rayv1.RayJob) (o Observed, err error) {
	o = Observed{Job: job, Now: r.now(), Suffix: r.suffix(), Options: r.Options, DeletionPolicy: r.DeletionPolicy, ClusterValidation: r.ClusterValidation,
		DeleteRayJobOnShutdown: r.DeleteRayJobOnShutdown, TransitionGracePeriod: r.TransitionGracePeriod, StatusCheckTimeout: r.StatusCheckTimeout}
	defer func() {
		failed := o.JobInfoErr != nil && !errors.Is(o.JobInfoErr, dashboard.ErrNotFound)
		o.DashboardFailures = r.failures.Record(ctrl.ObjectKeyFromObject(job), failed)
	}()
	if name := job.Status.RayClusterName; name != "" {
		rc := &rayv1.RayCluster{}
		switch err := r.Cache.Get(ctx, ctrl.ObjectKey{Namespace: job.Namespace, Name: name}, rc); {
		case err == nil && !selectorMode(job) && !ownedBy(rc, job):
			o.ClusterTaken = true
		case err == nil:
			o.Cluster = rc
		case !apierrors.IsNotFound(err):
			return o, fmt.Errorf("read RayCluster %s: %w", name, err)
		}
	}
	tearingDown := job.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusSuspending ||
		job.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusRetrying
	sub := &batchv1.Job{}
	switch err := r.Cache.Get(ctx, ctrl.ObjectKey{Namespace: job.Namespace, Name: job.Name}, sub); {
	case err == nil:
		// A submitter of another submission is an earlier attempt's, still in the cache: never this
		// attempt's (its failure must not fail this one); a teardown deletes any.
		if ownedBy(sub, job) && (tearingDown || SubmissionID(sub) == job.Status.JobId) {
			o.Submitter = sub
		}
	case !apierrors.IsNotFound(err):
		return o, fmt.Errorf("read the submitter Job: %w", err)
	}
	if tearingDown && o.Cluster == nil && o.Submitter == nil {
		if err := r.confirmGone(ctx, job, &o); err != nil {
			return o, err
		}
	}
	if NeedsHead(job) && o.Cluster != nil {
		head := &corev1.Pod{}
		switch err := r.Cache.Get(ctx, ctrl.ObjectKey{Namespace: job.Namespace, Name: names.HeadPod(o.Cluster.Name)}, head); {
		case err == nil:
			o.Head = head
		case !apierrors.IsNotFound(err):
			return o, fmt.Errorf("read the head pod of RayCluster %s: %w", o.Cluster.Name, err)
		}
	}
	if o.Cluster != nil && !selectorMode(job) && (job.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusInitializing ||
		job.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusRunning) {
		svc := &corev1.Service{}
		switch err := r.Cache.Get(ctx, ctrl.ObjectKey{Namespace: job.Namespace, Name: HeadServiceName(job)}, svc); {
		case err == nil:
			o.HeadService = svc
		case !apierrors.IsNotFound(err):
			return o, fmt.Errorf("read the RayJob's head Service: %w", err)
		}
	}
	if NeedsJobInfo(job) && o.Cluster != nil {
		api, err := r.jobAPI(ctx, job, o.Cluster)
		if err != nil {
			o.JobInfoErr = err
			return o, nil
		}
		o.JobInfo, o.JobInfoErr = api.GetJob(ctx, job.Status.JobId)
	}
	return o, nil
}

// confirmGone reads from the API server the attempt's cluster and submitter, which the cache does not
// show, into o when they exist: a teardown clears the attempt's names once both are gone, and a cache that
// lags a create (or another operator instance's create) must not make it forget a cluster that then leaks.
func (r *Reconciler) confirmGone(ctx context.Context, job *rayv1.RayJob, o *Observed) error {
	if name := job.Status.RayClusterName; name != "" {
		rc := &rayv1.RayCluster{}
		switch err := r.APIReader.Get(ctx, ctrl.ObjectKey{Namespace: job.Namespace, Name: name}, rc); {
		case err == nil:
			o.Cluster = rc
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("confirm RayCluster %s is gone: %w", name, err)
		}
	}
	sub := &batchv1.Job{}
	switch err := r.APIReader.Get(ctx, ctrl.ObjectKey{Namespace: job.Namespace, Name: job.Name}, sub); {
	case err == nil:
		if ownedBy(sub, job) {
			o.Submitter = sub
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("confirm the submitter Job is gone: %w", err)
	}
	return nil
}

// jobAPI opens the dashboard of rc with the token its auth asks for.
func (r *Reconciler) jobAPI(ctx context.Context, job *rayv1.RayJob, rc *rayv1.RayCluster) (dashboard.JobAPI, error) {
	base, err := shared.DashboardBase(r.DashboardAddress, rc, r.Options)
	if err != nil {
		return nil, err
	}
	token, err := authtoken.Read(ctx, r.APIReader, rc)
	if err != nil {
		return nil, err
	}
	return r.Dashboards.Jobs(base, token), nil
}

// notOwnedError reports an object holding a name the RayJob needs that the RayJob does not control: kray
// neither takes it as its own nor changes it.
type notOwnedError struct {
	kind string
	obj  ctrl.ObjectKey
	job  *rayv1.RayJob
}

func (e *notOwnedError) Error() string {
	return fmt.Sprintf("%s %s exists and is not controlled by RayJob %s/%s: kray does not use or change it; delete it, or rename the RayJob",
		e.kind, e.obj, e.job.Namespace, e.job.Name)
}

// ownedLive reads the object of name (into obj, which names its kind) from the API server, after a create
// found it existing: nil when the RayJob controls it (the cache had not caught up), else a notOwnedError.
func (r *Reconciler) ownedLive(ctx context.Context, job *rayv1.RayJob, obj ctrl.Object, name string) error {
	key := ctrl.ObjectKey{Namespace: job.Namespace, Name: name}
	if err := r.APIReader.Get(ctx, key, obj); err != nil {
		return fmt.Errorf("read %s after its create found it existing: %w", key, err)
	}
	if !ownedBy(obj, job) {
		kind := "Job"
		if _, ok := obj.(*corev1.Service); ok {
			kind = "Service"
		}
		return &notOwnedError{kind: kind, obj: key, job: job}
	}
	return nil
}

// syncHeadService creates the RayJob's head Service, or points the RayJob's own at the current cluster's
// head. It reads the Service from the cache (it carries ray.io/cluster), and from the API server only when a
// create finds it existing: a Service kray made before it carried the label, or someone else's. It never
// changes a Service the RayJob does not control (a notOwnedError). It returns the write it attempted
// ("create", "update" or "").
func (r *Reconciler) syncHeadService(ctx context.Context, job *rayv1.RayJob, desired *corev1.Service) (string, error) {
	live := &corev1.Service{}
	switch err := r.Cache.Get(ctx, ctrl.ObjectKeyFromObject(desired), live); {
	case apierrors.IsNotFound(err):
		err := r.Writer.Create(ctx, desired)
		if err == nil {
			return "create", nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return "create", fmt.Errorf("create the RayJob's head Service: %w", err)
		}
		if err := r.ownedLive(ctx, job, live, desired.Name); err != nil {
			return "create", err
		}
	case err != nil:
		return "update", fmt.Errorf("read the RayJob's head Service: %w", err)
	case !ownedBy(live, job):
		return "update", &notOwnedError{kind: "Service", obj: ctrl.ObjectKeyFromObject(live), job: job}
	}
	if maps.Equal(live.Spec.Selector, desired.Spec.Selector) && live.Labels[constants.LabelCluster] == desired.Labels[constants.LabelCluster] {
		return "", nil
	}
	updated := live.DeepCopy()
	updated.Spec.Selector = desired.Spec.Selector
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	updated.Labels[constants.LabelCluster] = desired.Labels[constants.LabelCluster]
	if err := r.Writer.Update(ctx, updated); err != nil {
		return "update", fmt.Errorf("point the RayJob's head Service at RayCluster %s: %w", job.Status.RayClusterName, err)
	}
	return "update", nil
}

// submit posts req to the job's cluster; a submission id the dashboard already holds was submitted before
// (by this operator before a restart, or by another instance) and is success.
func (r *Reconciler) submit(ctx context.Context, job *rayv1.RayJob, req dashboard.SubmitRequest) error {
	rc := &rayv1.RayCluster{}
	if err := r.Cache.Get(ctx, ctrl.ObjectKey{Namespace: job.Namespace, Name: job.Status.RayClusterName}, rc); err != nil {
		return fmt.Errorf("read RayCluster %s: %w", job.Status.RayClusterName, err)
	}
	api, err := r.jobAPI(ctx, job, rc)
	if err != nil {
		return err
	}
	if err := api.Submit(ctx, req); err != nil && !errors.Is(err, dashboard.ErrAlreadySubmitted) {
		return err
	}
	return nil
}

// finalize asks the dashboard to stop a Ray job that has not ended, then releases the RayJob; the garbage
// collector deletes its cluster and submitter. A dashboard that cannot be reached does not hold the RayJob.
func (r *Reconciler) finalize(ctx context.Context, job *rayv1.RayJob) error {
	if !controllerutil.ContainsFinalizer(job, constants.FinalizerRayJob) {
		return nil
	}
	if id := job.Status.JobId; id != "" && !rayv1.IsJobTerminal(job.Status.JobStatus) && job.Status.RayClusterName != "" {
		rc := &rayv1.RayCluster{}
		if err := r.Cache.Get(ctx, ctrl.ObjectKey{Namespace: job.Namespace, Name: job.Status.RayClusterName}, rc); err == nil {
			api, err := r.jobAPI(ctx, job, rc)
			if err == nil {
				err = api.Stop(ctx, id)
			}
			switch {
			case err == nil:
				r.Events.Emit(job, r.now(), shared.Normal(EventStoppedRayJob, fmt.Sprintf("Stopped Ray job %s on RayCluster %s/%s", id, rc.Namespace, rc.Name)))
			case !errors.Is(err, dashboard.ErrNotFound):
				r.Events.Emit(job, r.now(), shared.Warning(EventFailedToStopRayJob, fmt.Sprintf("Failed to stop Ray job %s on RayCluster %s/%s: %v", id, rc.Namespace, rc.Name, err)))
			}
		}
	}
	return shared.RemoveFinalizer(ctx, r.Writer, job, constants.FinalizerRayJob)
}

func (r *Reconciler) now() time.Time {
	return shared.Clock(r.Clock).Now()
}

func (r *Reconciler) suffix() string {
	if r.Suffix != nil {
		return r.Suffix()
	}
	return shared.NameSuffix()
}
