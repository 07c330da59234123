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
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/dashboard"
	"github.com/kray-project/kray/pkg/spec"
)

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
	if interrupted(o, d) || preRunningDeadlineExceeded(o, d) {
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
	url, err := shared.DashboardAddress(o.Cluster, o.Options)
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
func ownedBy(obj metav1.Object, job *rayv1.RayJob) bool { return shared.OwnedBy(obj, job) }

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
		d.wantRequeue(PollInterval) // a new head pod wakes the RayJob; the poll is the fallback
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
// selected cluster is waited for, as the user must create it; a name someone else's cluster holds is
// replaced by a new one.
func clusterPresent(o Observed, d *Decision) bool {
	if o.Cluster != nil {
		return true
	}
	job := o.Job
	if o.ClusterTaken {
		// Nothing was created under the stored name (someone else's cluster holds it): the attempt's cluster
		// gets another, stored before it is created.
		taken := d.Status.RayClusterName
		d.Status.RayClusterName = job.Name + "-" + o.Suffix
		d.Events = append(d.Events, shared.Warning(shared.EventFailedToCreateRayCluster, fmt.Sprintf(
			"RayCluster %s/%s exists and is not controlled by RayJob %s/%s: kray does not use or change it; the job's cluster is named %s instead",
			job.Namespace, taken, job.Namespace, job.Name, d.Status.RayClusterName)))
		return false
	}
	if selectorMode(job) {
		d.Events = append(d.Events, shared.Warning(EventRayClusterNotFound,
			fmt.Sprintf("RayCluster %s/%s set in the clusterSelector is not found. It must be created manually", job.Namespace, d.Status.RayClusterName)))
		d.wantRequeue(PollInterval)
		return false
	}
	rc := Cluster(jobWithStatus(job, &d.Status), d.Status.RayClusterName)
	WithSubmitter(job, rc, o.Options.Scheduling.Scheduler)
	d.Actions = append(d.Actions, Action{Kind: CreateCluster, Cluster: rc})
	return false
}

// deadlineExceeded fails the attempt once activeDeadlineSeconds have passed since it started
// (DeadlineExceeded), and otherwise asks to be woken at the deadline.
func deadlineExceeded(o Observed, d *Decision) bool {
	return pastDeadline(o, d, o.Job.Spec.ActiveDeadlineSeconds, rayv1.DeadlineExceeded, "activeDeadlineSeconds", "ActiveDeadlineSeconds")
}

// preRunningDeadlineExceeded fails an attempt that has not reached Running preRunningDeadlineSeconds after
// its start (KubeRay v1.7's rule, for Initializing and Waiting), and otherwise asks to be woken at the
// deadline.
func preRunningDeadlineExceeded(o Observed, d *Decision) bool {
	return pastDeadline(o, d, o.Job.Spec.PreRunningDeadlineSeconds, rayv1.PreRunningDeadlineExceeded, "preRunningDeadlineSeconds", "PreRunningDeadlineSeconds")
}

// pastDeadline fails the attempt with reason, in KubeRay's words naming the field, once seconds (unset: no
// deadline) have passed since it started, and otherwise asks to be woken at the deadline.
func pastDeadline(o Observed, d *Decision, seconds *int32, reason rayv1.JobFailedReason, field, label string) bool {
	st := &d.Status
	if seconds == nil || st.StartTime == nil {
		return false
	}
	deadline := st.StartTime.Add(time.Duration(*seconds) * time.Second)
	if o.Now.Before(deadline) {
		d.wantRequeue(deadline.Sub(o.Now))
		return false
	}
	failJob(d, reason, fmt.Sprintf("The RayJob has passed the %s. StartTime: %v. %s: %d", field, st.StartTime, label, *seconds))
	return true
}

// statusChecksTimedOut fails an attempt whose job status reads from the dashboard have kept failing for the
// job status check timeout since the first of them (KubeRay v1.7's JobStatusCheckTimeoutExceeded; like a
// passed activeDeadlineSeconds, it is not retried).
func statusChecksTimedOut(o Observed, d *Decision) bool {
	st := &d.Status
	if st.JobStatusCheckFailureStartTime == nil {
		return false
	}
	timeout, since := statusCheckTimeout(o), st.JobStatusCheckFailureStartTime.Time
	if o.Now.Before(since.Add(timeout)) {
		return false
	}
	failJob(d, rayv1.JobStatusCheckTimeoutExceeded, fmt.Sprintf("Job status checks have been failing since %s; exceeded timeout of %ds",
		since.Format(time.DateTime), int(timeout.Seconds())))
	return true
}

// statusCheckTimeout is o's job status check timeout, DefaultStatusCheckTimeout unless set.
func statusCheckTimeout(o Observed) time.Duration {
	if o.StatusCheckTimeout > 0 {
		return o.StatusCheckTimeout
	}
	return DefaultStatusCheckTimeout
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
	if statusChecksTimedOut(o, d) {
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
	if submitterJobMode(job) && o.Submitter != nil && !submitterFinished(o.Submitter) {
		// A running submitter's next pod would submit again on a new head: its head is checked at every
		// poll (and on every head pod event), however long the dashboard fails.
		d.wantRequeue(PollInterval)
	} else {
		d.wantRequeue(pollAfter(o.DashboardFailures))
	}
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
		if st.JobStatusCheckFailureStartTime == nil {
			st.JobStatusCheckFailureStartTime = &metav1.Time{Time: o.Now}
		}
		d.wantRequeue(st.JobStatusCheckFailureStartTime.Add(statusCheckTimeout(o)).Sub(o.Now))
		return
	case o.JobInfo == nil:
		return
	}
	st.JobStatusCheckFailureStartTime = nil
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
func submitterFinished(sub *batchv1.Job) bool { return finishedCondition(sub) != nil }

// finishedCondition is the submitter Job's Complete or Failed condition that holds, nil while it runs.
func finishedCondition(sub *batchv1.Job) *batchv1.JobCondition {
	for i, c := range sub.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return &sub.Status.Conditions[i]
		}
	}
	return nil
}

// pollAfter is when a running job's dashboard is read next after failures reads in a row failed.
func pollAfter(failures int) time.Duration {
	return shared.Backoff(failures, PollInterval, MaxPollInterval)
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
	c := finishedCondition(sub)
	if c == nil {
		return nil, false
	}
	finishedAt := c.LastTransitionTime.DeepCopy()
	if c.Type != batchv1.JobFailed {
		return finishedAt, false
	}
	if st.JobStatus == rayv1.JobStatusFailed {
		failJob(d, rayv1.AppFailed, st.Message)
	} else {
		failJob(d, rayv1.SubmissionFailed, fmt.Sprintf("Job submission has failed. Reason: %s. Message: %s", c.Reason, c.Message))
	}
	return finishedAt, true
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
	st.JobStatusCheckFailureStartTime = nil
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
	if now == rayv1.JobDeploymentStatusFailed && limit != nil && *st.Failed < *limit+1 &&
		st.Reason != rayv1.DeadlineExceeded && st.Reason != rayv1.JobStatusCheckTimeoutExceeded {
		st.JobDeploymentStatus = rayv1.JobDeploymentStatusRetrying
		return
	}
	st.EndTime = ptr.To(metav1.NewTime(o.Now))
	d.RequeueAfter = 0 // the status write's watch event brings the reconcile that cleans up
}
