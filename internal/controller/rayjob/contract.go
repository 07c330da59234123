package rayjob

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/dashboard"
	"github.com/kray-project/kray/pkg/validation"
)

// Timing of the state machine, KubeRay's.
const (
	// PollInterval is how often a running job's status is read from the dashboard, which has no watch.
	PollInterval = 3 * time.Second
	// MaxPollInterval caps the poll of a dashboard whose reads keep failing, which doubles with each failure.
	MaxPollInterval = time.Minute
	// SubmitterFinishedTimeout is how long after the submitter finished the Ray job may take to be terminal.
	SubmitterFinishedTimeout = 30 * time.Second
	// DefaultTransitionGracePeriod is how long after the Ray job ended the RayJob may stay Running, unless the
	// operator is told otherwise (KubeRay's RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS).
	DefaultTransitionGracePeriod = 300 * time.Second
	// DefaultStatusCheckTimeout is how long the reads of a running job's status from the dashboard may keep
	// failing before the attempt fails with JobStatusCheckTimeoutExceeded, unless the operator is told
	// otherwise (KubeRay v1.7's RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS).
	DefaultStatusCheckTimeout = 300 * time.Second
)

// Status messages that KubeRay writes word for word.
const (
	msgGracePeriodExceeded = "JobDeploymentStatus does not transition to Complete or Failed within the grace period after JobStatus reaches a terminal state."
	msgSubmitterNoRayJob   = "Submitter completed but Ray job not found in RayCluster."
)

// Status messages of kray's own, for what KubeRay does not detect.
const (
	// msgJobLost is failJob's message for a Ray job that the dashboard reported before and no longer knows.
	msgJobLost = "The Ray job %s is no longer on RayCluster %s/%s: the dashboard reported it before and now does not know it. " +
		"The Ray head was restarted without GCS fault tolerance, which loses every job; it is not submitted again in this attempt"
	// msgHeadReplaced is failJob's message for a head restarted while the submitter followed the Ray job.
	msgHeadReplaced = "The Ray head of RayCluster %s/%s was restarted (pod %s, incarnation %s, was %s) before the Ray job %s ended. " +
		"Without GCS fault tolerance Ray loses every job with its head; the job is not submitted again in this attempt"
)

// Observed is what the reconciler read for one RayJob: the inputs of Next.
type Observed struct {
	// Job is the RayJob as read; Next never changes it.
	Job *rayv1.RayJob
	// Cluster is the RayJob's RayCluster (status.rayClusterName), nil when absent, and nil when a RayJob
	// that creates its cluster does not control the one of that name (ClusterTaken).
	Cluster *rayv1.RayCluster
	// ClusterTaken is set when a RayCluster of status.rayClusterName exists that the RayJob does not
	// control, though it is to create its own: the name is someone else's.
	ClusterTaken bool
	// Submitter is the K8sJobMode submitter Job, nil when absent.
	Submitter *batchv1.Job
	// Head is Cluster's head pod, read only where NeedsHead says; nil when absent.
	Head *corev1.Pod
	// HeadService is the RayJob's head Service (HeadServiceName) as cached, nil when absent.
	HeadService *corev1.Service
	// JobInfo is the dashboard's answer for status.jobId; nil when not asked or when it failed (JobInfoErr).
	JobInfo *dashboard.JobInfo
	// JobInfoErr is dashboard.ErrNotFound, or why the dashboard could not be read.
	JobInfoErr error
	// Now is the reconcile's clock.
	Now time.Time
	// Suffix is a fresh random name suffix, used when a new attempt needs names.
	Suffix string
	// Options are the builders' operator-level settings.
	Options builder.Options
	// DeletionPolicy is the RayJobDeletionPolicy feature gate: deletionStrategy is served only with it.
	DeletionPolicy bool
	// ClusterValidation are the operator settings the cluster spec is checked with (the feature gates).
	ClusterValidation validation.ClusterOptions
	// DeleteRayJobOnShutdown makes shutdownAfterJobFinishes delete the RayJob itself, not only its cluster
	// (KubeRay's DELETE_RAYJOB_CR_AFTER_JOB_FINISHES).
	DeleteRayJobOnShutdown bool
	// TransitionGracePeriod replaces DefaultTransitionGracePeriod when positive.
	TransitionGracePeriod time.Duration
	// StatusCheckTimeout replaces DefaultStatusCheckTimeout when positive.
	StatusCheckTimeout time.Duration
	// DashboardFailures is how many reads of the dashboard in a row have failed for this RayJob, this one
	// included; each doubles the wait before the next.
	DashboardFailures int
}

// ActionKind names what the reconciler must do to the cluster, the submitter or the dashboard.
type ActionKind string

// The actions of a Decision.
const (
	CreateCluster   ActionKind = "CreateCluster"
	DeleteCluster   ActionKind = "DeleteCluster"
	CreateSubmitter ActionKind = "CreateSubmitter"
	DeleteSubmitter ActionKind = "DeleteSubmitter"
	SubmitJob       ActionKind = "SubmitJob"
	// SuspendWorkers updates the cluster (Action.Cluster holds the update) with every worker group suspended.
	SuspendWorkers ActionKind = "SuspendWorkers"
	// DeleteRayJob deletes the RayJob itself; its cluster and submitter follow through ownership.
	DeleteRayJob ActionKind = "DeleteRayJob"
	// SyncHeadService creates the RayJob's head Service (Action.Service), or points it at the current cluster.
	SyncHeadService ActionKind = "SyncHeadService"
)

// Action is one write Next asks for, with the object or request it writes.
type Action struct {
	Kind      ActionKind
	Cluster   *rayv1.RayCluster
	Submitter *batchv1.Job
	Service   *corev1.Service
	Request   dashboard.SubmitRequest
}

// Event is a Kubernetes event the reconciler records after the status write.
type Event = shared.Event

// Decision is Next's answer: the status to write, the actions to take and when to look again.
type Decision struct {
	Status       rayv1.RayJobStatus
	Actions      []Action
	Events       []Event
	RequeueAfter time.Duration
}

// wantRequeue keeps the earliest of the requeues asked for.
func (d *Decision) wantRequeue(after time.Duration) {
	if after <= 0 {
		after = time.Second
	}
	if d.RequeueAfter == 0 || after < d.RequeueAfter {
		d.RequeueAfter = after
	}
}

// NeedsJobInfo reports whether Next, for job, needs the dashboard's answer about status.jobId.
func NeedsJobInfo(job *rayv1.RayJob) bool {
	return job.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusRunning && job.Status.JobId != ""
}

// NeedsHead reports whether Next, for job, needs its cluster's head pod: a K8sJobMode submitter is made for,
// and followed on, one incarnation of the head.
func NeedsHead(job *rayv1.RayJob) bool {
	s := job.Status.JobDeploymentStatus
	return submitterJobMode(job) && (s == rayv1.JobDeploymentStatusInitializing || s == rayv1.JobDeploymentStatusRunning)
}

// Next is the RayJob state machine: from what the reconciler observed, the next status and the writes that
// lead to it. It is pure; the reconciler performs the actions, then writes the status once.
func Next(o Observed) Decision {
	job := o.Job
	d := Decision{Status: *job.Status.DeepCopy()}
	st := &d.Status
	if o.Cluster != nil {
		st.RayClusterStatus = *o.Cluster.Status.DeepCopy()
	}
	if reason, err := validate(job, validation.RayJobOptions{DeletionPolicy: o.DeletionPolicy, Cluster: o.ClusterValidation}); err != nil {
		if st.JobDeploymentStatus != rayv1.JobDeploymentStatusValidationFailed || st.Message != err.Error() {
			d.Events = append(d.Events, shared.Warning(reason, fmt.Sprintf("%s/%s: %v", job.Namespace, job.Name, err)))
		}
		st.JobDeploymentStatus = rayv1.JobDeploymentStatusValidationFailed
		st.Reason = rayv1.ValidationFailed
		st.Message = err.Error()
		return d
	}
	before := job.Status.JobDeploymentStatus
	switch before {
	case rayv1.JobDeploymentStatusNew:
		if job.Spec.Suspend {
			st.JobDeploymentStatus = rayv1.JobDeploymentStatusSuspended // created suspended (Kueue): nothing to tear down
			break
		}
		start(o, st)
	case rayv1.JobDeploymentStatusInitializing:
		initializing(o, &d)
	case rayv1.JobDeploymentStatusWaiting:
		if preRunningDeadlineExceeded(o, &d) {
			break
		}
		if job.Spec.JobId != "" {
			st.JobId = job.Spec.JobId
			st.JobDeploymentStatus = rayv1.JobDeploymentStatusRunning
		}
	case rayv1.JobDeploymentStatusRunning:
		if running(o, &d); st.JobDeploymentStatus == rayv1.JobDeploymentStatusRunning && o.Cluster != nil {
			keepHeadService(o, &d)
		}
	case rayv1.JobDeploymentStatusSuspending, rayv1.JobDeploymentStatusRetrying:
		tearDown(o, &d)
	case rayv1.JobDeploymentStatusSuspended:
		if !job.Spec.Suspend {
			st.JobStatus = rayv1.JobStatusNew
			st.JobDeploymentStatus = rayv1.JobDeploymentStatusNew
		}
	case rayv1.JobDeploymentStatusComplete, rayv1.JobDeploymentStatusFailed:
		finished(o, &d)
		return d
	default: // ValidationFailed stays: the RayJob must be recreated, as with KubeRay.
		return d
	}
	ended(o, before, &d)
	return d
}

// validate runs the metadata, spec and status checks, returning the event reason of the first failure.
func validate(job *rayv1.RayJob, opts validation.RayJobOptions) (string, error) {
	if err := validation.RayJobMetadata(job); err != nil {
		return EventInvalidRayJobMetadata, err
	}
	if err := validation.RayJobSpec(job, opts); err != nil {
		return EventInvalidRayJobSpec, err
	}
	if err := validation.RayJobStatus(job); err != nil {
		return EventInvalidRayJobStatus, err
	}
	return "", nil
}
