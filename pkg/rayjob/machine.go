package rayjob

import (
	"errors"
	"fmt"
	"maps"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/dashboard"
	"github.com/kray-project/kray/pkg/spec"
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
	// Cluster is the RayJob's RayCluster (status.rayClusterName), nil when absent.
	Cluster *rayv1.RayCluster
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
	// DeleteRayJobOnShutdown makes shutdownAfterJobFinishes delete the RayJob itself, not only its cluster
	// (KubeRay's DELETE_RAYJOB_CR_AFTER_JOB_FINISHES).
	DeleteRayJobOnShutdown bool
	// TransitionGracePeriod replaces DefaultTransitionGracePeriod when positive.
	TransitionGracePeriod time.Duration
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
type Event struct {
	Type, Reason, Message string
}

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
	if reason, err := validate(job, validation.RayJobOptions{DeletionPolicy: o.DeletionPolicy}); err != nil {
		if st.JobDeploymentStatus != rayv1.JobDeploymentStatusValidationFailed || st.Message != err.Error() {
			d.Events = append(d.Events, Event{corev1.EventTypeWarning, reason, fmt.Sprintf("%s/%s: %v", job.Namespace, job.Name, err)})
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
		return constants.EventInvalidRayJobMetadata, err
	}
	if err := validation.RayJobSpec(job, opts); err != nil {
		return constants.EventInvalidRayJobSpec, err
	}
	if err := validation.RayJobStatus(job); err != nil {
		return constants.EventInvalidRayJobStatus, err
	}
	return "", nil
}

// start names the new attempt's submission and cluster and records its start; nothing is created before
// these names are in the status, so a restarted or second operator reuses them instead of making others.
func start(o Observed, st *rayv1.RayJobStatus) {
	job := o.Job
	if job.Spec.SubmissionMode != rayv1.InteractiveMode && st.JobId == "" {
		st.JobId = job.Spec.JobId
		if st.JobId == "" {
			st.JobId = job.Name + "-" + o.Suffix
		}
	}
	if st.RayClusterName == "" {
		st.RayClusterName = job.Spec.ClusterSelector[constants.LabelCluster]
		if st.RayClusterName == "" {
			st.RayClusterName = job.Name + "-" + o.Suffix
		}
	}
	st.JobDeploymentStatus = rayv1.JobDeploymentStatusInitializing
	st.StartTime = ptr.To(metav1.NewTime(o.Now))
	st.EndTime = nil
}

// submitterJobMode reports whether job submits through a submitter Job (K8sJobMode, the default).
func submitterJobMode(job *rayv1.RayJob) bool {
	return job.Spec.SubmissionMode == rayv1.K8sJobMode || job.Spec.SubmissionMode == ""
}

// kraySubmits reports whether kray submits job itself over the Job API: HTTPMode, and SidecarMode, whose
// head container only follows the job.
func kraySubmits(job *rayv1.RayJob) bool {
	return job.Spec.SubmissionMode == rayv1.HTTPMode || job.Spec.SubmissionMode == rayv1.SidecarMode
}

// selectorMode reports whether job runs on a RayCluster the user created and selected.
func selectorMode(job *rayv1.RayJob) bool { return len(job.Spec.ClusterSelector) != 0 }

// ownCluster reports whether rc was created for job (and so may be deleted by it).
func ownCluster(job *rayv1.RayJob, rc *rayv1.RayCluster) bool { return ownedBy(rc, job) }

// initializing creates the cluster, waits until it is ready, then starts the submission.
func initializing(o Observed, d *Decision) {
	job, st := o.Job, &d.Status
	if interrupted(o, d) {
		return
	}
	if !clusterPresent(o, d) {
		return
	}
	if o.Cluster.Status.State != rayv1.Ready {
		if selectorMode(job) {
			d.wantRequeue(PollInterval) // a selected cluster is not owned, so its changes do not wake the RayJob
		}
		return // an owned cluster's status changes wake the RayJob
	}
	url, err := DashboardURL(o.Cluster, o.Options)
	if err != nil {
		st.Message = err.Error()
		return
	}
	st.DashboardURL = url
	keepHeadService(o, d)
	switch job.Spec.SubmissionMode {
	case rayv1.InteractiveMode:
		st.JobDeploymentStatus = rayv1.JobDeploymentStatusWaiting
		return
	case rayv1.HTTPMode, rayv1.SidecarMode:
	default: // K8sJobMode
		if o.Submitter == nil && !createSubmitter(o, d, url) {
			return
		}
	}
	st.JobDeploymentStatus = rayv1.JobDeploymentStatusRunning
	st.Message = ""
}

// keepHeadService asks for the RayJob's head Service when it is missing or does not select the current
// cluster's head, or is not the RayJob's own (the reconciler then reports whose it is and changes nothing).
// A job on a selected cluster has none, as with KubeRay.
func keepHeadService(o Observed, d *Decision) {
	if selectorMode(o.Job) {
		return
	}
	want := HeadService(o.Job, o.Cluster, o.Options)
	if live := o.HeadService; live != nil && ownedBy(live, o.Job) && maps.Equal(live.Spec.Selector, want.Spec.Selector) &&
		live.Labels[constants.LabelCluster] == want.Labels[constants.LabelCluster] {
		return
	}
	d.Actions = append(d.Actions, Action{Kind: SyncHeadService, Service: want})
}

// ownedBy reports whether obj is controlled by job.
func ownedBy(obj metav1.Object, job *rayv1.RayJob) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == job.UID
}

// jobWithStatus is job carrying the status being decided, for builders that read status.jobId.
func jobWithStatus(job *rayv1.RayJob, st *rayv1.RayJobStatus) *rayv1.RayJob {
	j := job.DeepCopy()
	j.Status = *st.DeepCopy()
	return j
}

// interrupted moves an attempt whose RayJob is being suspended to Suspending, or fails one past its
// deadline, and reports whether it did either.
func interrupted(o Observed, d *Decision) bool {
	if o.Job.Spec.Suspend {
		d.Status.JobDeploymentStatus = rayv1.JobDeploymentStatusSuspending
		return true
	}
	return deadlineExceeded(o, d)
}

// createSubmitter asks for the attempt's submitter Job, or fails the attempt when it cannot be built; it
// reports whether the Job was asked for. Without the head pod (being replaced) it waits.
func createSubmitter(o Observed, d *Decision, address string) bool {
	if o.Head == nil {
		d.wantRequeue(PollInterval) // head pods do not wake RayJobs
		return false
	}
	sub, err := SubmitterJob(jobWithStatus(o.Job, &d.Status), o.Cluster, address, HeadIncarnation(o.Cluster, o.Head), o.Options)
	if err != nil {
		failJob(d, rayv1.SubmissionFailed, fmt.Sprintf("Cannot build the submitter Job: %v", err))
		return false
	}
	d.Actions = append(d.Actions, Action{Kind: CreateSubmitter, Submitter: sub})
	return true
}

// clusterPresent asks for the RayJob's cluster when it is missing and reports whether it exists. A missing
// selected cluster is waited for, as the user must create it.
func clusterPresent(o Observed, d *Decision) bool {
	if o.Cluster != nil {
		return true
	}
	job := o.Job
	if selectorMode(job) {
		d.Events = append(d.Events, Event{corev1.EventTypeWarning, constants.EventRayClusterNotFound,
			fmt.Sprintf("RayCluster %s/%s set in the clusterSelector is not found. It must be created manually", job.Namespace, d.Status.RayClusterName)})
		d.wantRequeue(PollInterval)
		return false
	}
	d.Actions = append(d.Actions, Action{Kind: CreateCluster, Cluster: Cluster(jobWithStatus(job, &d.Status), d.Status.RayClusterName)})
	return false
}

// deadlineExceeded fails the attempt once activeDeadlineSeconds have passed since it started, and otherwise
// asks to be woken at the deadline.
func deadlineExceeded(o Observed, d *Decision) bool {
	job, st := o.Job, &d.Status
	if job.Spec.ActiveDeadlineSeconds == nil || st.StartTime == nil {
		return false
	}
	deadline := st.StartTime.Add(time.Duration(*job.Spec.ActiveDeadlineSeconds) * time.Second)
	if o.Now.Before(deadline) {
		d.wantRequeue(deadline.Sub(o.Now))
		return false
	}
	failJob(d, rayv1.DeadlineExceeded, fmt.Sprintf("The RayJob has passed the activeDeadlineSeconds. StartTime: %v. ActiveDeadlineSeconds: %d",
		st.StartTime, *job.Spec.ActiveDeadlineSeconds))
	return true
}

// failJob moves the RayJob to Failed with reason and message.
func failJob(d *Decision, reason rayv1.JobFailedReason, message string) {
	d.Status.JobDeploymentStatus = rayv1.JobDeploymentStatusFailed
	d.Status.Reason = reason
	d.Status.Message = message
}

// running follows the submission until the Ray job and (in K8sJobMode) its submitter have finished.
func running(o Observed, d *Decision) {
	job, st := o.Job, &d.Status
	if interrupted(o, d) {
		return
	}
	grace := o.TransitionGracePeriod
	if grace <= 0 {
		grace = DefaultTransitionGracePeriod
	}
	if rayv1.IsJobTerminal(st.JobStatus) && st.RayJobStatusInfo.EndTime != nil &&
		!o.Now.Before(st.RayJobStatusInfo.EndTime.Add(grace)) {
		st.JobDeploymentStatus = rayv1.JobDeploymentStatusComplete
		if st.JobStatus == rayv1.JobStatusFailed {
			st.JobDeploymentStatus = rayv1.JobDeploymentStatusFailed
		}
		st.Reason = rayv1.JobDeploymentStatusTransitionGracePeriodExceeded
		st.Message = msgGracePeriodExceeded
		return
	}
	if o.Cluster == nil {
		if selectorMode(job) {
			failJob(d, rayv1.AppFailed, fmt.Sprintf("RayCluster %s/%s set in the clusterSelector was deleted while the job ran", job.Namespace, st.RayClusterName))
		} else {
			failJob(d, rayv1.AppFailed, fmt.Sprintf("RayCluster %s/%s of the RayJob was deleted while the job ran", job.Namespace, st.RayClusterName))
		}
		return
	}
	d.wantRequeue(pollAfter(o.DashboardFailures))
	if lost(o, d) {
		return
	}
	var finishedAt *metav1.Time
	if submitterJobMode(job) {
		var failed bool
		finishedAt, failed = submitter(o, d)
		if finishedAt != nil && !rayv1.IsJobTerminal(st.JobStatus) && !o.Now.Before(finishedAt.Add(SubmitterFinishedTimeout)) &&
			(o.JobInfo == nil || !rayv1.IsJobTerminal(o.JobInfo.Status)) {
			st.JobStatus = rayv1.JobStatusFailed
			failJob(d, rayv1.JobDeploymentStatusTransitionGracePeriodExceeded, fmt.Sprintf(
				"The RayJob submitter finished at %s but the ray job did not reach terminal state within %s",
				finishedAt.Format(time.DateTime), SubmitterFinishedTimeout))
			return
		}
		if failed {
			return
		}
	}
	switch {
	case errors.Is(o.JobInfoErr, dashboard.ErrNotFound):
		switch {
		case kraySubmits(job):
			req, err := SubmitRequest(jobWithStatus(job, st))
			if err != nil {
				failJob(d, rayv1.SubmissionFailed, err.Error())
				return
			}
			d.Actions = append(d.Actions, Action{Kind: SubmitJob, Request: req})
		case finishedAt != nil:
			failJob(d, rayv1.AppFailed, msgSubmitterNoRayJob)
		}
		return
	case o.JobInfoErr != nil:
		st.Message = fmt.Sprintf("Cannot read the Ray job's status from the dashboard: %v", o.JobInfoErr)
		return
	case o.JobInfo == nil:
		return
	}
	info := o.JobInfo
	st.JobStatus = info.Status
	st.Message = info.Message
	st.RayJobStatusInfo.StartTime = msTime(info.StartTime, st.RayJobStatusInfo.StartTime)
	st.RayJobStatusInfo.EndTime = msTime(info.EndTime, st.RayJobStatusInfo.EndTime)
	if !rayv1.IsJobTerminal(info.Status) || (submitterJobMode(job) && finishedAt == nil) {
		st.Reason = ""
		return
	}
	if info.Status == rayv1.JobStatusFailed {
		failJob(d, rayv1.AppFailed, info.Message)
		return
	}
	st.JobDeploymentStatus = rayv1.JobDeploymentStatusComplete
}

// lost ends an attempt whose Ray job the cluster no longer holds: the dashboard does not know a job it
// reported before, or (K8sJobMode) the head is no longer the incarnation the submitter was made for while
// the submitter still follows the job. Without GCS fault tolerance Ray forgets its jobs with its head, and a
// new submission (kray's, or the submitter's next pod's) would run the attempt a second time, so a job
// reported ended ends as reported and any other fails the attempt; backoffLimit decides what follows. It
// reports whether it ended the attempt.
func lost(o Observed, d *Decision) bool {
	st := &d.Status
	forgotten := errors.Is(o.JobInfoErr, dashboard.ErrNotFound) && st.JobStatus != rayv1.JobStatusNew
	was, now := headIncarnations(o)
	replaced := was != now
	switch {
	case !forgotten && !replaced:
		return false
	case rayv1.IsJobTerminal(st.JobStatus):
		endAsReported(d)
	case replaced:
		failJob(d, rayv1.AppFailed, fmt.Sprintf(msgHeadReplaced, o.Job.Namespace, st.RayClusterName, o.Head.Name, now, was, st.JobId))
	default:
		failJob(d, rayv1.AppFailed, fmt.Sprintf(msgJobLost, st.JobId, o.Job.Namespace, st.RayClusterName))
	}
	return true
}

// headIncarnations are the head incarnation a K8sJobMode submitter still following the job was made for, and
// the head's incarnation now; both empty when there is no such submitter or no head pod to compare, or when
// the cluster has GCS fault tolerance, whose restarted head keeps its jobs (the dashboard then says how the
// job fared).
func headIncarnations(o Observed) (was, now string) {
	sub := o.Submitter
	if !submitterJobMode(o.Job) || sub == nil || o.Head == nil || submitterFinished(sub) || spec.FTEnabled(o.Cluster) {
		return "", ""
	}
	was = sub.Annotations[AnnotationSubmittedOnHead]
	if was == "" {
		return "", ""
	}
	return was, HeadIncarnation(o.Cluster, o.Head)
}

// endAsReported ends the attempt as the Ray job's last reported status says, for a job whose end was seen
// before its head (and with it Ray's record of the job) was lost.
func endAsReported(d *Decision) {
	if d.Status.JobStatus == rayv1.JobStatusFailed {
		failJob(d, rayv1.AppFailed, d.Status.Message)
		return
	}
	d.Status.JobDeploymentStatus = rayv1.JobDeploymentStatusComplete
}

// submitterFinished reports whether the submitter Job has completed or failed.
func submitterFinished(sub *batchv1.Job) bool {
	for _, c := range sub.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return true
		}
	}
	return false
}

// pollAfter is when a running job's dashboard is read next after failures reads in a row failed:
// PollInterval, doubled for each failure after the first, at most MaxPollInterval. A dashboard that is down
// (a head restarting, a network fault) is not hammered, and a slow one does not keep a reconcile worker busy
// every few seconds.
func pollAfter(failures int) time.Duration {
	after := PollInterval
	for i := 1; i < failures && after < MaxPollInterval; i++ {
		after *= 2
	}
	return min(after, MaxPollInterval)
}

// msTime converts the dashboard's Unix milliseconds; zero keeps the previous value.
func msTime(ms uint64, prev *metav1.Time) *metav1.Time {
	if ms == 0 {
		return prev
	}
	return ptr.To(metav1.NewTime(time.UnixMilli(int64(ms)).UTC()))
}

// submitter reads the K8sJobMode submitter Job: when it finished, and whether its failure failed the RayJob.
// A missing submitter is created again; its script submits only what the dashboard does not hold.
func submitter(o Observed, d *Decision) (*metav1.Time, bool) {
	st := &d.Status
	sub := o.Submitter
	if sub == nil {
		return nil, !createSubmitter(o, d, st.DashboardURL)
	}
	var finishedAt *metav1.Time
	for _, c := range sub.Status.Conditions {
		if c.Status != corev1.ConditionTrue || (c.Type != batchv1.JobComplete && c.Type != batchv1.JobFailed) {
			continue
		}
		t := c.LastTransitionTime
		finishedAt = &t
		if c.Type == batchv1.JobFailed {
			if st.JobStatus == rayv1.JobStatusFailed {
				failJob(d, rayv1.AppFailed, st.Message)
			} else {
				failJob(d, rayv1.SubmissionFailed, fmt.Sprintf("Job submission has failed. Reason: %s. Message: %s", c.Reason, c.Message))
			}
			return finishedAt, true
		}
	}
	return finishedAt, false
}

// tearDown deletes the attempt's cluster (only one created for the RayJob) and submitter, and once both are
// gone clears the attempt from the status: Suspending becomes Suspended, Retrying a new attempt.
func tearDown(o Observed, d *Decision) {
	job, st := o.Job, &d.Status
	present := false
	if o.Cluster != nil && ownCluster(job, o.Cluster) {
		present = true
		if o.Cluster.DeletionTimestamp == nil {
			d.Actions = append(d.Actions, Action{Kind: DeleteCluster, Cluster: o.Cluster})
		}
	}
	if o.Submitter != nil {
		present = true
		if o.Submitter.DeletionTimestamp == nil {
			d.Actions = append(d.Actions, Action{Kind: DeleteSubmitter, Submitter: o.Submitter})
		}
	}
	if present {
		d.wantRequeue(PollInterval)
		return
	}
	st.RayClusterStatus = rayv1.RayClusterStatus{}
	st.RayClusterName = ""
	st.DashboardURL = ""
	st.JobId = ""
	st.Message = ""
	st.Reason = ""
	st.RayJobStatusInfo = rayv1.RayJobStatusInfo{}
	st.JobStatus = rayv1.JobStatusNew
	if st.JobDeploymentStatus == rayv1.JobDeploymentStatusSuspending {
		st.JobDeploymentStatus = rayv1.JobDeploymentStatusSuspended
	} else {
		st.JobDeploymentStatus = rayv1.JobDeploymentStatusNew
	}
}

// ended does the bookkeeping of an attempt that has just ended: the end time, the success and failure
// counts, and a retry while backoffLimit allows one (never after a deadline). It asks for no cleanup: the
// decision that ends a RayJob is stored first, and only a reconcile that reads it back (Complete or Failed)
// deletes anything, so a lost status write can never make a finished job look like a running one whose
// cluster vanished.
func ended(o Observed, before rayv1.JobDeploymentStatus, d *Decision) {
	st := &d.Status
	now := st.JobDeploymentStatus
	if now == before || !rayv1.IsJobDeploymentTerminal(now) {
		return
	}
	if now == rayv1.JobDeploymentStatusFailed {
		st.Failed = ptr.To(ptr.Deref(st.Failed, 0) + 1)
	}
	if now == rayv1.JobDeploymentStatusComplete && st.JobStatus == rayv1.JobStatusSucceeded {
		st.Succeeded = ptr.To(ptr.Deref(st.Succeeded, 0) + 1)
	}
	limit := o.Job.Spec.BackoffLimit
	if now == rayv1.JobDeploymentStatusFailed && limit != nil && *st.Failed < *limit+1 && st.Reason != rayv1.DeadlineExceeded {
		st.JobDeploymentStatus = rayv1.JobDeploymentStatusRetrying
		return
	}
	st.EndTime = ptr.To(metav1.NewTime(o.Now))
	d.RequeueAfter = 0 // the status write's watch event brings the reconcile that cleans up
}

// finished cleans up after an ended RayJob: a submitter still running is deleted at once (it follows a job
// that is over, and would submit it again should the head restart); then, with the RayJobDeletionPolicy gate
// and a deletionStrategy, its rules or its onSuccess/onFailure policy; otherwise shutdownAfterJobFinishes
// deletes the cluster (or, with DeleteRayJobOnShutdown, the RayJob) ttlSecondsAfterFinished after the end.
// Nothing is done to a selected cluster.
func finished(o Observed, d *Decision) {
	job, st := o.Job, &d.Status
	if sub := o.Submitter; sub != nil && sub.DeletionTimestamp == nil && !submitterFinished(sub) {
		d.Actions = append(d.Actions, Action{Kind: DeleteSubmitter, Submitter: sub})
	}
	if selectorMode(job) || st.EndTime == nil {
		return
	}
	if ds := job.Spec.DeletionStrategy; ds != nil && o.DeletionPolicy {
		if len(ds.DeletionRules) > 0 {
			applyDeletionRules(o, d)
		} else {
			applyLegacyPolicy(o, d)
		}
		return
	}
	if !job.Spec.ShutdownAfterJobFinishes {
		return
	}
	if due := st.EndTime.Add(time.Duration(job.Spec.TTLSecondsAfterFinished) * time.Second); o.Now.Before(due) {
		d.wantRequeue(due.Sub(o.Now))
		return
	}
	if o.DeleteRayJobOnShutdown {
		deletePolicy(o, d, rayv1.DeleteSelf)
		return
	}
	deletePolicy(o, d, rayv1.DeleteCluster)
}

// applyLegacyPolicy runs onSuccess (SUCCEEDED) or onFailure (FAILED) ttlSecondsAfterFinished after the end;
// a job that ended otherwise (STOPPED, or failed before its Ray job did) matches neither.
func applyLegacyPolicy(o Observed, d *Decision) {
	ds, st := o.Job.Spec.DeletionStrategy, &d.Status
	var p *rayv1.DeletionPolicy
	switch st.JobStatus {
	case rayv1.JobStatusSucceeded:
		p = ds.OnSuccess
	case rayv1.JobStatusFailed:
		p = ds.OnFailure
	}
	if p == nil || p.Policy == nil || *p.Policy == rayv1.DeleteNone {
		return
	}
	if due := st.EndTime.Add(time.Duration(o.Job.Spec.TTLSecondsAfterFinished) * time.Second); o.Now.Before(due) {
		d.wantRequeue(due.Sub(o.Now))
		return
	}
	deletePolicy(o, d, *p.Policy)
}

// impact orders the deletion policies: when several rules are due at once, the most impactful runs.
var impact = map[rayv1.DeletionPolicyType]int{rayv1.DeleteNone: 1, rayv1.DeleteWorkers: 2, rayv1.DeleteCluster: 3, rayv1.DeleteSelf: 4}

// applyDeletionRules runs, of the rules for the job's status that are due and not done yet, the most
// impactful one, and asks to be woken when the next rule falls due.
func applyDeletionRules(o Observed, d *Decision) {
	st := &d.Status
	var due *rayv1.DeletionRule
	for i, rule := range o.Job.Spec.DeletionStrategy.DeletionRules {
		if rule.Condition.JobStatus != st.JobStatus {
			continue
		}
		at := st.EndTime.Add(time.Duration(rule.Condition.TTLSeconds) * time.Second)
		if o.Now.Before(at) {
			d.wantRequeue(at.Sub(o.Now))
			continue
		}
		if policyDone(o, rule.Policy) {
			continue
		}
		if due == nil || impact[rule.Policy] > impact[due.Policy] {
			due = &o.Job.Spec.DeletionStrategy.DeletionRules[i]
		}
	}
	if due != nil {
		deletePolicy(o, d, due.Policy)
	}
}

// policyDone reports whether what policy deletes is already gone (or going).
func policyDone(o Observed, policy rayv1.DeletionPolicyType) bool {
	rc := o.Cluster
	switch policy {
	case rayv1.DeleteNone:
		return true
	case rayv1.DeleteSelf:
		return false
	case rayv1.DeleteCluster:
		return rc == nil || rc.DeletionTimestamp != nil || !ownCluster(o.Job, rc)
	}
	if rc == nil || rc.DeletionTimestamp != nil || !ownCluster(o.Job, rc) {
		return true
	}
	for _, g := range rc.Spec.WorkerGroupSpecs {
		if !ptr.Deref(g.Suspend, false) {
			return false
		}
	}
	return true
}

// deletePolicy asks for the writes that carry out policy, unless they are done already.
func deletePolicy(o Observed, d *Decision, policy rayv1.DeletionPolicyType) {
	if policyDone(o, policy) {
		return
	}
	switch policy {
	case rayv1.DeleteCluster:
		d.Actions = append(d.Actions, Action{Kind: DeleteCluster, Cluster: o.Cluster})
	case rayv1.DeleteWorkers:
		rc := o.Cluster.DeepCopy()
		for i := range rc.Spec.WorkerGroupSpecs {
			rc.Spec.WorkerGroupSpecs[i].Suspend = ptr.To(true)
		}
		d.Actions = append(d.Actions, Action{Kind: SuspendWorkers, Cluster: rc})
	case rayv1.DeleteSelf:
		d.Actions = append(d.Actions, Action{Kind: DeleteRayJob})
	}
}
