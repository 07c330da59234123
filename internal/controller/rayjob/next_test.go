package rayjob

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/fixture"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/dashboard"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const jobUID = types.UID("job-uid")

// newJob is a valid K8sJobMode RayJob named "train" with the fixture's cluster spec.
func newJob(edits ...func(*rayv1.RayJob)) *rayv1.RayJob {
	rc := fixture.Cluster("ns", "ignored")
	rc.Spec.WorkerGroupSpecs = []rayv1.WorkerGroupSpec{fixture.Group("small", 1, 0, 5)}
	job := &rayv1.RayJob{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", UID: jobUID, Labels: map[string]string{"team": "a"},
			Finalizers: []string{constants.FinalizerRayJob}},
		Spec: rayv1.RayJobSpec{Entrypoint: "python train.py", SubmissionMode: rayv1.K8sJobMode, BackoffLimit: ptr.To[int32](0),
			RayClusterSpec: rc.Spec.DeepCopy()},
	}
	for _, e := range edits {
		e(job)
	}
	return job
}

// inState sets the status as a previous reconcile would have left it in state.
func inState(state rayv1.JobDeploymentStatus) func(*rayv1.RayJob) {
	return func(j *rayv1.RayJob) {
		j.Status.JobDeploymentStatus = state
		j.Status.JobId = "train-abcde"
		j.Status.RayClusterName = "train-abcde"
		j.Status.StartTime = ptr.To(metav1.NewTime(t0))
		if state != rayv1.JobDeploymentStatusInitializing {
			j.Status.DashboardURL = "train-abcde-head-svc.ns.svc.cluster.local:8265"
		}
	}
}

func mode(m rayv1.JobSubmissionMode) func(*rayv1.RayJob) {
	return func(j *rayv1.RayJob) { j.Spec.SubmissionMode = m }
}

// ownedCluster is the job's cluster in state.
func ownedCluster(job *rayv1.RayJob, state rayv1.ClusterState) *rayv1.RayCluster {
	rc := Cluster(job, job.Status.RayClusterName)
	rc.UID = "rc-uid"
	rc.Status.State = state
	return rc
}

// submitterJob is the job's submitter with a finished condition of type cond (none when empty) at t.
func submitterJob(job *rayv1.RayJob, cond batchv1.JobConditionType, at time.Time) *batchv1.Job {
	sub := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: job.Name, Namespace: job.Namespace, UID: "sub-uid",
		Annotations: map[string]string{AnnotationSubmittedOnHead: "head-uid/0"}, OwnerReferences: []metav1.OwnerReference{OwnerReference(job)}}}
	if cond != "" {
		sub.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at),
			Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}
	}
	return sub
}

// headPod is rc's head pod with uid, its Ray container restarted restarts times; the submitters of
// submitterJob were made for headPod(rc, "head-uid", 0).
func headPod(rc *rayv1.RayCluster, uid types.UID, restarts int32) *corev1.Pod {
	ray := rc.Spec.HeadGroupSpec.Template.Spec.Containers[constants.RayContainerIndex].Name
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: rc.Name + "-head-0", Namespace: rc.Namespace, UID: uid},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: ray, RestartCount: restarts}}}}
}

func kinds(actions []Action) []ActionKind {
	var out []ActionKind
	for _, a := range actions {
		out = append(out, a.Kind)
	}
	return out
}

func TestNewAttemptIsNamedBeforeAnythingIsCreated(t *testing.T) {
	tests := []struct {
		name                string
		job                 *rayv1.RayJob
		wantJobID, wantName string
	}{
		{"generated", newJob(), "train-xyz12", "train-xyz12"},
		{"user's job id", newJob(func(j *rayv1.RayJob) { j.Spec.JobId = "mine" }), "mine", "train-xyz12"},
		{"interactive: the user submits", newJob(mode(rayv1.InteractiveMode)), "", "train-xyz12"},
		{"selected cluster", newJob(func(j *rayv1.RayJob) {
			j.Spec.RayClusterSpec = nil
			j.Spec.ClusterSelector = map[string]string{constants.LabelCluster: "shared"}
		}), "train-xyz12", "shared"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Next(Observed{Job: tt.job, Now: t0, Suffix: "xyz12"})
			if len(d.Actions) != 0 {
				t.Errorf("actions = %v, want none before the names are stored", kinds(d.Actions))
			}
			st := d.Status
			if st.JobDeploymentStatus != rayv1.JobDeploymentStatusInitializing || st.JobId != tt.wantJobID ||
				st.RayClusterName != tt.wantName || !st.StartTime.Time.Equal(t0) {
				t.Errorf("status = %s jobId=%q cluster=%q start=%v, want Initializing %q %q %v", st.JobDeploymentStatus,
					st.JobId, st.RayClusterName, st.StartTime, tt.wantJobID, tt.wantName, t0)
			}
		})
	}
}

func TestCreatedSuspendedWaitsWithNothing(t *testing.T) {
	job := newJob(func(j *rayv1.RayJob) { j.Spec.Suspend = true; j.Spec.ShutdownAfterJobFinishes = true })
	d := Next(Observed{Job: job, Now: t0, Suffix: "xyz12"})
	if d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusSuspended || d.Status.RayClusterName != "" || len(d.Actions) != 0 {
		t.Errorf("got %s cluster=%q actions=%v, want Suspended with no name and no action", d.Status.JobDeploymentStatus, d.Status.RayClusterName, kinds(d.Actions))
	}
	job.Status = d.Status
	job.Spec.Suspend = false
	if d := Next(Observed{Job: job, Now: t0}); d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusNew {
		t.Errorf("unsuspended: %s, want New", d.Status.JobDeploymentStatus)
	}
}

func TestInitializing(t *testing.T) {
	t.Run("creates the cluster it named", func(t *testing.T) {
		job := newJob(inState(rayv1.JobDeploymentStatusInitializing))
		d := Next(Observed{Job: job, Now: t0})
		if diff := cmp.Diff([]ActionKind{CreateCluster}, kinds(d.Actions)); diff != "" {
			t.Fatalf("actions (-want +got):\n%s", diff)
		}
		rc := d.Actions[0].Cluster
		if rc.Name != "train-abcde" || rc.Namespace != "ns" || !ownCluster(job, rc) {
			t.Errorf("cluster %s/%s owned=%t", rc.Namespace, rc.Name, ownCluster(job, rc))
		}
		wantLabels := map[string]string{"team": "a", constants.LabelOriginatedFromCRName: "train", constants.LabelOriginatedFromCRD: "RayJob",
			constants.LabelJobSubmissionMode: string(rayv1.K8sJobMode)}
		if diff := cmp.Diff(wantLabels, rc.Labels); diff != "" {
			t.Errorf("labels (-want +got):\n%s", diff)
		}
		if d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusInitializing {
			t.Errorf("status moved to %s before the cluster is ready", d.Status.JobDeploymentStatus)
		}
	})
	t.Run("waits for a ready cluster", func(t *testing.T) {
		job := newJob(inState(rayv1.JobDeploymentStatusInitializing))
		d := Next(Observed{Job: job, Cluster: ownedCluster(job, ""), Now: t0})
		if len(d.Actions) != 0 || d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusInitializing || d.RequeueAfter != 0 {
			t.Errorf("got %s actions=%v requeue=%s, want to wait for the cluster's watch event", d.Status.JobDeploymentStatus, kinds(d.Actions), d.RequeueAfter)
		}
	})
	for _, tt := range []struct {
		mode    rayv1.JobSubmissionMode
		want    rayv1.JobDeploymentStatus
		actions []ActionKind
	}{
		{rayv1.K8sJobMode, rayv1.JobDeploymentStatusRunning, []ActionKind{SyncHeadService, CreateSubmitter}},
		{rayv1.HTTPMode, rayv1.JobDeploymentStatusRunning, []ActionKind{SyncHeadService}},
		{rayv1.SidecarMode, rayv1.JobDeploymentStatusRunning, []ActionKind{SyncHeadService}},
		{rayv1.InteractiveMode, rayv1.JobDeploymentStatusWaiting, []ActionKind{SyncHeadService}},
	} {
		t.Run("ready cluster, "+string(tt.mode), func(t *testing.T) {
			job := newJob(mode(tt.mode), inState(rayv1.JobDeploymentStatusInitializing))
			rc := ownedCluster(job, rayv1.Ready)
			d := Next(Observed{Job: job, Cluster: rc, Head: headPod(rc, "head-uid", 0), Now: t0})
			if d.Status.JobDeploymentStatus != tt.want {
				t.Errorf("status = %s, want %s", d.Status.JobDeploymentStatus, tt.want)
			}
			if diff := cmp.Diff(tt.actions, kinds(d.Actions)); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if want := "train-abcde-head-svc.ns.svc.cluster.local:8265"; d.Status.DashboardURL != want {
				t.Errorf("dashboardURL = %q, want %q", d.Status.DashboardURL, want)
			}
			if d.Status.RayClusterStatus.State != rayv1.Ready {
				t.Errorf("rayClusterStatus not copied: %+v", d.Status.RayClusterStatus)
			}
			if tt.mode == rayv1.K8sJobMode && d.Actions[1].Submitter.Annotations[AnnotationSubmittedOnHead] != "head-uid/0" {
				t.Errorf("submitter annotations %v, want the head's incarnation", d.Actions[1].Submitter.Annotations)
			}
		})
	}
	t.Run("K8sJobMode waits for the head pod before making the submitter", func(t *testing.T) {
		job := newJob(inState(rayv1.JobDeploymentStatusInitializing))
		d := Next(Observed{Job: job, Cluster: ownedCluster(job, rayv1.Ready), Now: t0})
		if d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusInitializing || slices.Contains(kinds(d.Actions), CreateSubmitter) || d.RequeueAfter != PollInterval {
			t.Errorf("got %s actions=%v requeue=%s, want Initializing, no submitter, a poll", d.Status.JobDeploymentStatus, kinds(d.Actions), d.RequeueAfter)
		}
	})
	t.Run("a selected cluster that does not exist is waited for", func(t *testing.T) {
		job := newJob(func(j *rayv1.RayJob) {
			j.Spec.RayClusterSpec = nil
			j.Spec.ClusterSelector = map[string]string{constants.LabelCluster: "shared"}
		}, inState(rayv1.JobDeploymentStatusInitializing))
		d := Next(Observed{Job: job, Now: t0})
		if len(d.Actions) != 0 || d.RequeueAfter != PollInterval || len(d.Events) != 1 || d.Events[0].Reason != EventRayClusterNotFound {
			t.Errorf("actions=%v requeue=%s events=%v, want no creation, a poll and RayClusterNotFound", kinds(d.Actions), d.RequeueAfter, d.Events)
		}
	})
}

func TestWaitingForTheUsersJobID(t *testing.T) {
	job := newJob(mode(rayv1.InteractiveMode), inState(rayv1.JobDeploymentStatusWaiting))
	job.Status.JobId = ""
	if d := Next(Observed{Job: job, Now: t0}); d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusWaiting {
		t.Errorf("without spec.jobId: %s, want Waiting", d.Status.JobDeploymentStatus)
	}
	job.Spec.JobId = "users-job"
	d := Next(Observed{Job: job, Now: t0})
	if d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning || d.Status.JobId != "users-job" {
		t.Errorf("with spec.jobId: %s %q, want Running users-job", d.Status.JobDeploymentStatus, d.Status.JobId)
	}
}

func TestRunningHTTPMode(t *testing.T) {
	job := newJob(mode(rayv1.HTTPMode), inState(rayv1.JobDeploymentStatusRunning), func(j *rayv1.RayJob) {
		j.Spec.RuntimeEnvYAML = "pip: [numpy]\nenv_vars: {A: b}\n"
		j.Spec.Metadata = map[string]string{"owner": "a"}
	})
	rc := ownedCluster(job, rayv1.Ready)

	t.Run("not on the dashboard: submitted under the stored id", func(t *testing.T) {
		d := Next(Observed{Job: job, Cluster: rc, HeadService: HeadService(job, rc, builder.Options{}), JobInfoErr: dashboard.ErrNotFound, Now: t0})
		if diff := cmp.Diff([]ActionKind{SubmitJob}, kinds(d.Actions)); diff != "" {
			t.Fatalf("actions (-want +got):\n%s", diff)
		}
		want := dashboard.SubmitRequest{Entrypoint: "python train.py", SubmissionID: "train-abcde",
			RuntimeEnv: map[string]any{"pip": []any{"numpy"}, "env_vars": map[string]any{"A": "b"}}, Metadata: map[string]string{"owner": "a"}}
		if diff := cmp.Diff(want, d.Actions[0].Request); diff != "" {
			t.Errorf("request (-want +got):\n%s", diff)
		}
		if d.RequeueAfter != PollInterval || d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning {
			t.Errorf("requeue %s status %s, want a poll while Running", d.RequeueAfter, d.Status.JobDeploymentStatus)
		}
	})
	t.Run("running", func(t *testing.T) {
		d := Next(Observed{Job: job, Cluster: rc, HeadService: HeadService(job, rc, builder.Options{}), JobInfo: &dashboard.JobInfo{Status: rayv1.JobStatusRunning, Message: "on it", StartTime: uint64(t0.UnixMilli())}, Now: t0})
		if len(d.Actions) != 0 || d.Status.JobStatus != rayv1.JobStatusRunning || d.Status.Message != "on it" ||
			!d.Status.RayJobStatusInfo.StartTime.Time.Equal(t0) {
			t.Errorf("got %+v actions %v", d.Status, kinds(d.Actions))
		}
	})
	t.Run("succeeded", func(t *testing.T) {
		d := Next(Observed{Job: job, Cluster: rc, HeadService: HeadService(job, rc, builder.Options{}), JobInfo: &dashboard.JobInfo{Status: rayv1.JobStatusSucceeded, EndTime: uint64(t0.UnixMilli())}, Now: t0.Add(time.Minute)})
		st := d.Status
		if st.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || ptr.Deref(st.Succeeded, 0) != 1 || st.Failed != nil ||
			!st.EndTime.Time.Equal(t0.Add(time.Minute)) || d.RequeueAfter != 0 {
			t.Errorf("got %s succeeded=%v failed=%v end=%v requeue=%s", st.JobDeploymentStatus, st.Succeeded, st.Failed, st.EndTime, d.RequeueAfter)
		}
	})
	t.Run("failed", func(t *testing.T) {
		d := Next(Observed{Job: job, Cluster: rc, HeadService: HeadService(job, rc, builder.Options{}), JobInfo: &dashboard.JobInfo{Status: rayv1.JobStatusFailed, Message: "exit 1"}, Now: t0})
		st := d.Status
		if st.JobDeploymentStatus != rayv1.JobDeploymentStatusFailed || st.Reason != rayv1.AppFailed || ptr.Deref(st.Failed, 0) != 1 || st.Message != "exit 1" {
			t.Errorf("got %s %s failed=%v %q", st.JobDeploymentStatus, st.Reason, st.Failed, st.Message)
		}
	})
	t.Run("stopped is complete", func(t *testing.T) {
		d := Next(Observed{Job: job, Cluster: rc, HeadService: HeadService(job, rc, builder.Options{}), JobInfo: &dashboard.JobInfo{Status: rayv1.JobStatusStopped}, Now: t0})
		if d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || d.Status.Succeeded != nil {
			t.Errorf("got %s succeeded=%v, want Complete, not counted as a success", d.Status.JobDeploymentStatus, d.Status.Succeeded)
		}
	})
	t.Run("dashboard down is a message, not a failure", func(t *testing.T) {
		d := Next(Observed{Job: job, Cluster: rc, HeadService: HeadService(job, rc, builder.Options{}), JobInfoErr: errors.New("connection refused"), Now: t0})
		if d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning || !strings.Contains(d.Status.Message, "connection refused") ||
			d.RequeueAfter != PollInterval || len(d.Actions) != 0 {
			t.Errorf("got %s %q requeue=%s actions=%v", d.Status.JobDeploymentStatus, d.Status.Message, d.RequeueAfter, kinds(d.Actions))
		}
	})
	t.Run("reported before, now unknown: lost, not submitted again", func(t *testing.T) {
		seen := job.DeepCopy()
		seen.Status.JobStatus = rayv1.JobStatusPending
		d := Next(Observed{Job: seen, Cluster: rc, JobInfoErr: dashboard.ErrNotFound, Now: t0})
		st := d.Status
		if st.JobDeploymentStatus != rayv1.JobDeploymentStatusFailed || st.Reason != rayv1.AppFailed || len(d.Actions) != 0 ||
			!strings.Contains(st.Message, "is no longer on RayCluster ns/train-abcde") || ptr.Deref(st.Failed, 0) != 1 {
			t.Errorf("got %s %s %q failed=%v actions=%v, want Failed AppFailed, the loss explained, no submission",
				st.JobDeploymentStatus, st.Reason, st.Message, st.Failed, kinds(d.Actions))
		}
		seen.Spec.BackoffLimit = ptr.To[int32](1)
		if d := Next(Observed{Job: seen, Cluster: rc, JobInfoErr: dashboard.ErrNotFound, Now: t0}); d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRetrying {
			t.Errorf("with backoffLimit 1: %s, want Retrying", d.Status.JobDeploymentStatus)
		}
	})
	t.Run("cluster deleted under the job", func(t *testing.T) {
		d := Next(Observed{Job: job, Now: t0})
		if d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusFailed || d.Status.Reason != rayv1.AppFailed || len(d.Actions) != 0 {
			t.Errorf("got %s %s actions=%v, want Failed AppFailed without a new cluster", d.Status.JobDeploymentStatus, d.Status.Reason, kinds(d.Actions))
		}
	})
}

// SidecarMode is submitted by kray, as HTTPMode: once, under the stored id; a job reported before and no
// longer known is lost, never submitted again.
func TestRunningSidecarMode(t *testing.T) {
	job := newJob(mode(rayv1.SidecarMode), inState(rayv1.JobDeploymentStatusRunning))
	rc := ownedCluster(job, rayv1.Ready)
	o := Observed{Job: job, Cluster: rc, HeadService: HeadService(job, rc, builder.Options{}), JobInfoErr: dashboard.ErrNotFound, Now: t0}
	if d := Next(o); !cmp.Equal([]ActionKind{SubmitJob}, kinds(d.Actions)) || d.Actions[0].Request.SubmissionID != "train-abcde" {
		t.Errorf("not yet submitted: actions %v, want one SubmitJob under the stored id", kinds(d.Actions))
	}
	seen := job.DeepCopy()
	seen.Status.JobStatus = rayv1.JobStatusRunning
	o.Job = seen
	if d := Next(o); len(d.Actions) != 0 || d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusFailed || d.Status.Reason != rayv1.AppFailed {
		t.Errorf("lost: %s %s actions %v, want Failed AppFailed and no submission", d.Status.JobDeploymentStatus, d.Status.Reason, kinds(d.Actions))
	}
}

func TestRunningK8sJobMode(t *testing.T) {
	job := newJob(inState(rayv1.JobDeploymentStatusRunning))
	rc := ownedCluster(job, rayv1.Ready)
	succeeded := &dashboard.JobInfo{Status: rayv1.JobStatusSucceeded}
	tests := []struct {
		name       string
		sub        *batchv1.Job
		info       *dashboard.JobInfo
		infoErr    error
		now        time.Time
		want       rayv1.JobDeploymentStatus
		wantReason rayv1.JobFailedReason
		wantMsg    string
		actions    []ActionKind
		// reported is the Ray job status stored by an earlier reconcile.
		reported rayv1.JobStatus
		// head is the head pod observed (default: the incarnation the submitter was made for); noHead: none.
		head   *corev1.Pod
		noHead bool
		// ft turns GCS fault tolerance on.
		ft bool
	}{
		{name: "job ended, submitter still following logs", sub: submitterJob(job, "", t0), info: succeeded, now: t0,
			want: rayv1.JobDeploymentStatusRunning},
		{name: "job ended and submitter finished", sub: submitterJob(job, batchv1.JobComplete, t0), info: succeeded, now: t0,
			want: rayv1.JobDeploymentStatusComplete},
		{name: "submitter failed before the job was known", sub: submitterJob(job, batchv1.JobFailed, t0), infoErr: dashboard.ErrNotFound, now: t0,
			want: rayv1.JobDeploymentStatusFailed, wantReason: rayv1.SubmissionFailed,
			wantMsg: "Job submission has failed. Reason: BackoffLimitExceeded. Message: Job has reached the specified backoff limit"},
		{name: "submitter finished but the dashboard never heard of the job", sub: submitterJob(job, batchv1.JobComplete, t0), infoErr: dashboard.ErrNotFound,
			now: t0.Add(time.Second), want: rayv1.JobDeploymentStatusFailed, wantReason: rayv1.AppFailed, wantMsg: msgSubmitterNoRayJob},
		{name: "submitter finished 30s ago, job still running", sub: submitterJob(job, batchv1.JobComplete, t0),
			info: &dashboard.JobInfo{Status: rayv1.JobStatusRunning}, now: t0.Add(SubmitterFinishedTimeout),
			want: rayv1.JobDeploymentStatusFailed, wantReason: rayv1.JobDeploymentStatusTransitionGracePeriodExceeded},
		{name: "submitter deleted by someone: created again", info: &dashboard.JobInfo{Status: rayv1.JobStatusRunning}, now: t0,
			want: rayv1.JobDeploymentStatusRunning, actions: []ActionKind{CreateSubmitter}},
		{name: "not submitted yet: the submitter does it", sub: submitterJob(job, "", t0), infoErr: dashboard.ErrNotFound, now: t0,
			want: rayv1.JobDeploymentStatusRunning},
		{name: "head pod replaced before the job was reported: failed, the submitter not recreated", sub: submitterJob(job, "", t0),
			infoErr: errors.New("connection refused"), head: headPod(rc, "new-uid", 0), now: t0,
			want: rayv1.JobDeploymentStatusFailed, wantReason: rayv1.AppFailed,
			wantMsg: "The Ray head of RayCluster ns/train-abcde was restarted (pod train-abcde-head-0, incarnation new-uid/0, was head-uid/0) before the Ray job train-abcde ended. " +
				"Without GCS fault tolerance Ray loses every job with its head; the job is not submitted again in this attempt"},
		{name: "Ray container restarted in place while running", sub: submitterJob(job, "", t0), reported: rayv1.JobStatusRunning,
			info: &dashboard.JobInfo{Status: rayv1.JobStatusRunning}, head: headPod(rc, "head-uid", 1), now: t0,
			want: rayv1.JobDeploymentStatusFailed, wantReason: rayv1.AppFailed},
		{name: "head replaced after the job was reported SUCCEEDED: complete as reported", sub: submitterJob(job, "", t0), reported: rayv1.JobStatusSucceeded,
			infoErr: dashboard.ErrNotFound, head: headPod(rc, "new-uid", 0), now: t0, want: rayv1.JobDeploymentStatusComplete},
		{name: "reported before, now unknown: lost", sub: submitterJob(job, "", t0), reported: rayv1.JobStatusRunning,
			infoErr: dashboard.ErrNotFound, now: t0, want: rayv1.JobDeploymentStatusFailed, wantReason: rayv1.AppFailed},
		{name: "the lost job's submitter was deleted: not recreated", reported: rayv1.JobStatusRunning,
			infoErr: dashboard.ErrNotFound, now: t0, want: rayv1.JobDeploymentStatusFailed, wantReason: rayv1.AppFailed},
		{name: "GCS fault tolerance: a new head keeps the job, the dashboard decides", sub: submitterJob(job, "", t0), reported: rayv1.JobStatusRunning,
			info: &dashboard.JobInfo{Status: rayv1.JobStatusRunning}, head: headPod(rc, "new-uid", 0), ft: true, now: t0, want: rayv1.JobDeploymentStatusRunning},
		{name: "head pod being replaced: wait", sub: submitterJob(job, "", t0), reported: rayv1.JobStatusRunning,
			infoErr: errors.New("connection refused"), noHead: true, now: t0, want: rayv1.JobDeploymentStatusRunning},
		{name: "head replaced after the submitter finished: nothing to guard", sub: submitterJob(job, batchv1.JobComplete, t0), info: succeeded,
			head: headPod(rc, "new-uid", 0), now: t0, want: rayv1.JobDeploymentStatusComplete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := job.DeepCopy()
			j.Status.JobStatus = tt.reported
			head := tt.head
			if head == nil {
				head = headPod(rc, "head-uid", 0)
			}
			if tt.noHead {
				head = nil
			}
			cluster := rc
			if tt.ft {
				cluster = rc.DeepCopy()
				cluster.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{}
			}
			d := Next(Observed{Job: j, Cluster: cluster, HeadService: HeadService(j, rc, builder.Options{}), Head: head, Submitter: tt.sub, JobInfo: tt.info, JobInfoErr: tt.infoErr, Now: tt.now})
			if d.Status.JobDeploymentStatus != tt.want || d.Status.Reason != tt.wantReason || (tt.wantMsg != "" && d.Status.Message != tt.wantMsg) {
				t.Errorf("got %s %s %q, want %s %s %q", d.Status.JobDeploymentStatus, d.Status.Reason, d.Status.Message, tt.want, tt.wantReason, tt.wantMsg)
			}
			if diff := cmp.Diff(tt.actions, kinds(d.Actions)); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}

// A running job keeps its head Service: recreated when missing, pointed back at the job's cluster when it
// selects another; the reconciler refuses one the RayJob does not control. A selected cluster gets none.
func TestRunningKeepsTheHeadService(t *testing.T) {
	job := newJob(mode(rayv1.HTTPMode), inState(rayv1.JobDeploymentStatusRunning))
	rc := ownedCluster(job, rayv1.Ready)
	running := &dashboard.JobInfo{Status: rayv1.JobStatusRunning}
	own := HeadService(job, rc, builder.Options{})
	elsewhere := own.DeepCopy()
	elsewhere.Spec.Selector[constants.LabelCluster] = "train-old"
	foreign := own.DeepCopy()
	foreign.OwnerReferences = nil
	for _, tt := range []struct {
		name string
		svc  *corev1.Service
		want []ActionKind
	}{
		{"in place", own, nil},
		{"missing", nil, []ActionKind{SyncHeadService}},
		{"selecting another cluster", elsewhere, []ActionKind{SyncHeadService}},
		{"not the RayJob's", foreign, []ActionKind{SyncHeadService}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := Next(Observed{Job: job, Cluster: rc, HeadService: tt.svc, JobInfo: running, Now: t0})
			if diff := cmp.Diff(tt.want, kinds(d.Actions)); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if len(d.Actions) == 1 && d.Actions[0].Service.Spec.Selector[constants.LabelCluster] != rc.Name {
				t.Errorf("selector %v, want the job's cluster", d.Actions[0].Service.Spec.Selector)
			}
		})
	}
	t.Run("selected cluster", func(t *testing.T) {
		job := newJob(mode(rayv1.HTTPMode), inState(rayv1.JobDeploymentStatusRunning), func(j *rayv1.RayJob) {
			j.Spec.RayClusterSpec = nil
			j.Spec.ClusterSelector = map[string]string{constants.LabelCluster: "train-abcde"}
		})
		if d := Next(Observed{Job: job, Cluster: rc, JobInfo: running, Now: t0}); len(d.Actions) != 0 {
			t.Errorf("actions %v, want none", kinds(d.Actions))
		}
	})
}

func TestDeadline(t *testing.T) {
	job := newJob(inState(rayv1.JobDeploymentStatusRunning), func(j *rayv1.RayJob) {
		j.Spec.ActiveDeadlineSeconds = ptr.To[int32](60)
		j.Spec.BackoffLimit = ptr.To[int32](3)
	})
	rc := ownedCluster(job, rayv1.Ready)
	running := &dashboard.JobInfo{Status: rayv1.JobStatusRunning}
	d := Next(Observed{Job: job, Cluster: rc, Submitter: submitterJob(job, "", t0), JobInfo: running, Now: t0.Add(59 * time.Second)})
	if d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning || d.RequeueAfter != time.Second {
		t.Errorf("before the deadline: %s requeue=%s, want Running and a wake-up at the deadline", d.Status.JobDeploymentStatus, d.RequeueAfter)
	}
	d = Next(Observed{Job: job, Cluster: rc, Submitter: submitterJob(job, "", t0), JobInfo: running, Now: t0.Add(60 * time.Second)})
	if d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusFailed || d.Status.Reason != rayv1.DeadlineExceeded || ptr.Deref(d.Status.Failed, 0) != 1 {
		t.Errorf("at the deadline: %s %s failed=%v, want Failed DeadlineExceeded without a retry", d.Status.JobDeploymentStatus, d.Status.Reason, d.Status.Failed)
	}
}

func TestBackoffRetriesOnANewCluster(t *testing.T) {
	job := newJob(mode(rayv1.HTTPMode), inState(rayv1.JobDeploymentStatusRunning), func(j *rayv1.RayJob) { j.Spec.BackoffLimit = ptr.To[int32](1) })
	rc := ownedCluster(job, rayv1.Ready)
	failed := &dashboard.JobInfo{Status: rayv1.JobStatusFailed, Message: "boom"}

	d := Next(Observed{Job: job, Cluster: rc, JobInfo: failed, Now: t0})
	if d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRetrying || ptr.Deref(d.Status.Failed, 0) != 1 || d.Status.EndTime != nil {
		t.Fatalf("first failure: %s failed=%v end=%v, want Retrying, 1, no end", d.Status.JobDeploymentStatus, d.Status.Failed, d.Status.EndTime)
	}
	job.Status = d.Status
	d = Next(Observed{Job: job, Cluster: rc, Now: t0})
	if diff := cmp.Diff([]ActionKind{DeleteCluster}, kinds(d.Actions)); diff != "" || d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRetrying {
		t.Fatalf("retrying with the cluster present: %s, actions (-want +got):\n%s", d.Status.JobDeploymentStatus, diff)
	}
	deleting := rc.DeepCopy()
	deleting.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	if d := Next(Observed{Job: job, Cluster: deleting, Now: t0}); len(d.Actions) != 0 || d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRetrying {
		t.Fatalf("cluster being deleted: %s actions %v, want to wait", d.Status.JobDeploymentStatus, kinds(d.Actions))
	}
	d = Next(Observed{Job: job, Now: t0})
	st := d.Status
	if st.JobDeploymentStatus != rayv1.JobDeploymentStatusNew || st.RayClusterName != "" || st.JobId != "" || st.JobStatus != "" || ptr.Deref(st.Failed, 0) != 1 {
		t.Fatalf("cluster gone: %+v, want New with the attempt cleared and failed kept", st)
	}
	job.Status = st
	d = Next(Observed{Job: job, Now: t0.Add(time.Minute), Suffix: "second"})
	if d.Status.RayClusterName != "train-second" || d.Status.JobId != "train-second" {
		t.Fatalf("second attempt named %q/%q, want fresh names", d.Status.RayClusterName, d.Status.JobId)
	}
	job.Status = d.Status
	job.Status.JobDeploymentStatus = rayv1.JobDeploymentStatusRunning
	d = Next(Observed{Job: job, Cluster: ownedCluster(job, rayv1.Ready), JobInfo: failed, Now: t0.Add(2 * time.Minute)})
	if d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusFailed || ptr.Deref(d.Status.Failed, 0) != 2 || d.Status.EndTime == nil {
		t.Errorf("second failure: %s failed=%v, want Failed (backoffLimit 1 allows two attempts)", d.Status.JobDeploymentStatus, d.Status.Failed)
	}
}

func TestSuspendTearsDownAndResumes(t *testing.T) {
	job := newJob(inState(rayv1.JobDeploymentStatusRunning), func(j *rayv1.RayJob) {
		j.Spec.Suspend = true
		j.Spec.ShutdownAfterJobFinishes = true
	})
	rc := ownedCluster(job, rayv1.Ready)
	sub := submitterJob(job, "", t0)
	d := Next(Observed{Job: job, Cluster: rc, Submitter: sub, Now: t0})
	if d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusSuspending {
		t.Fatalf("suspend while Running: %s", d.Status.JobDeploymentStatus)
	}
	job.Status = d.Status
	d = Next(Observed{Job: job, Cluster: rc, Submitter: sub, Now: t0})
	if diff := cmp.Diff([]ActionKind{DeleteCluster, DeleteSubmitter}, kinds(d.Actions)); diff != "" {
		t.Fatalf("actions (-want +got):\n%s", diff)
	}
	d = Next(Observed{Job: job, Now: t0})
	if d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusSuspended || d.Status.RayClusterName != "" {
		t.Fatalf("all gone: %s %q", d.Status.JobDeploymentStatus, d.Status.RayClusterName)
	}
}

func TestSelectedClusterIsNeverDeleted(t *testing.T) {
	job := newJob(mode(rayv1.HTTPMode), inState(rayv1.JobDeploymentStatusRetrying), func(j *rayv1.RayJob) {
		j.Spec.RayClusterSpec = nil
		j.Spec.ClusterSelector = map[string]string{constants.LabelCluster: "train-abcde"}
		j.Spec.BackoffLimit = ptr.To[int32](2)
	})
	users := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "train-abcde", Namespace: "ns", UID: "users"}}
	d := Next(Observed{Job: job, Cluster: users, Now: t0})
	if len(d.Actions) != 0 || d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusNew {
		t.Errorf("retry on a selected cluster: %s actions %v, want New and no deletion", d.Status.JobDeploymentStatus, kinds(d.Actions))
	}
	job.Status.JobDeploymentStatus = rayv1.JobDeploymentStatusComplete
	job.Status.EndTime = ptr.To(metav1.NewTime(t0))
	job.Spec.ShutdownAfterJobFinishes = true
	if d := Next(Observed{Job: job, Cluster: users, Now: t0.Add(time.Hour)}); len(d.Actions) != 0 {
		t.Errorf("shutdown on a selected cluster: actions %v, want none", kinds(d.Actions))
	}
}

func TestShutdownAfterTTL(t *testing.T) {
	job := newJob(inState(rayv1.JobDeploymentStatusComplete), func(j *rayv1.RayJob) {
		j.Spec.ShutdownAfterJobFinishes = true
		j.Spec.TTLSecondsAfterFinished = 10
		j.Status.EndTime = ptr.To(metav1.NewTime(t0))
	})
	rc := ownedCluster(job, rayv1.Ready)
	if d := Next(Observed{Job: job, Cluster: rc, Now: t0.Add(4 * time.Second)}); len(d.Actions) != 0 || d.RequeueAfter != 6*time.Second {
		t.Errorf("before the TTL: actions %v requeue %s, want none and a wake-up in 6s", kinds(d.Actions), d.RequeueAfter)
	}
	if d := Next(Observed{Job: job, Cluster: rc, Now: t0.Add(10 * time.Second)}); !cmp.Equal([]ActionKind{DeleteCluster}, kinds(d.Actions)) {
		t.Errorf("at the TTL: actions %v, want DeleteCluster", kinds(d.Actions))
	}
	job.Spec.ShutdownAfterJobFinishes = false
	job.Spec.TTLSecondsAfterFinished = 0
	if d := Next(Observed{Job: job, Cluster: rc, Now: t0.Add(time.Hour)}); len(d.Actions) != 0 {
		t.Errorf("without shutdown: actions %v, want the cluster kept", kinds(d.Actions))
	}
}

// The reconcile that ends a RayJob asks for no cleanup, whatever the policy: the end is stored first.
func TestEndingDecisionCleansNothing(t *testing.T) {
	policies := map[string]func(*rayv1.RayJob){
		"shutdown at once": func(j *rayv1.RayJob) { j.Spec.ShutdownAfterJobFinishes = true },
		"delete self at once": func(j *rayv1.RayJob) {
			j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{DeletionRules: []rayv1.DeletionRule{deletionRule(rayv1.DeleteSelf, rayv1.JobStatusSucceeded, 0)}}
		},
	}
	for name, policy := range policies {
		t.Run(name, func(t *testing.T) {
			job := newJob(mode(rayv1.HTTPMode), inState(rayv1.JobDeploymentStatusRunning), policy)
			rc := ownedCluster(job, rayv1.Ready)
			info := &dashboard.JobInfo{SubmissionID: job.Status.JobId, Status: rayv1.JobStatusSucceeded, EndTime: uint64(t0.UnixMilli())}
			o := Observed{Job: job, Cluster: rc, JobInfo: info, Now: t0.Add(time.Minute), DeletionPolicy: true}
			d := Next(o)
			if d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || len(d.Actions) != 0 {
				t.Fatalf("ending decision: %s with actions %v, want Complete and none", d.Status.JobDeploymentStatus, kinds(d.Actions))
			}
			stored := job.DeepCopy()
			stored.Status = d.Status
			o.Job = stored
			if d := Next(o); len(d.Actions) != 1 {
				t.Errorf("once the end is stored: actions %v, want the policy's one write", kinds(d.Actions))
			}
		})
	}
}

// A submitter still following the job of an ended RayJob is deleted once the end is stored; a finished one
// stays, as with KubeRay.
func TestEndedJobsRunningSubmitterIsDeleted(t *testing.T) {
	job := newJob(inState(rayv1.JobDeploymentStatusFailed), func(j *rayv1.RayJob) { j.Status.EndTime = ptr.To(metav1.NewTime(t0)) })
	rc := ownedCluster(job, rayv1.Ready)
	if d := Next(Observed{Job: job, Cluster: rc, Submitter: submitterJob(job, "", t0), Now: t0}); !cmp.Equal([]ActionKind{DeleteSubmitter}, kinds(d.Actions)) {
		t.Errorf("running submitter: actions %v, want DeleteSubmitter", kinds(d.Actions))
	}
	if d := Next(Observed{Job: job, Cluster: rc, Submitter: submitterJob(job, batchv1.JobFailed, t0), Now: t0}); len(d.Actions) != 0 {
		t.Errorf("finished submitter: actions %v, want none", kinds(d.Actions))
	}
}

func TestPollBacksOffWhileTheDashboardFails(t *testing.T) {
	want := []time.Duration{3 * time.Second, 3 * time.Second, 6 * time.Second, 12 * time.Second, 24 * time.Second, 48 * time.Second, time.Minute, time.Minute}
	for failures, w := range want {
		if got := pollAfter(failures); got != w {
			t.Errorf("after %d failures: %s, want %s", failures, got, w)
		}
	}
	if got := pollAfter(1000); got != MaxPollInterval {
		t.Errorf("after 1000 failures: %s, want the cap", got)
	}
	job := newJob(mode(rayv1.HTTPMode), inState(rayv1.JobDeploymentStatusRunning), func(j *rayv1.RayJob) { j.Status.JobStatus = rayv1.JobStatusRunning })
	rc := ownedCluster(job, rayv1.Ready)
	d := Next(Observed{Job: job, Cluster: rc, HeadService: HeadService(job, rc, builder.Options{}), JobInfoErr: errors.New("timeout"), DashboardFailures: 4, Now: t0})
	if d.RequeueAfter != 24*time.Second || d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning {
		t.Errorf("fourth failure: %s requeue %s, want Running and 24s", d.Status.JobDeploymentStatus, d.RequeueAfter)
	}
	job.Spec.ActiveDeadlineSeconds = ptr.To[int32](10)
	d = Next(Observed{Job: job, Cluster: rc, HeadService: HeadService(job, rc, builder.Options{}), JobInfoErr: errors.New("timeout"), DashboardFailures: 4, Now: t0})
	if d.RequeueAfter != 10*time.Second {
		t.Errorf("deadline in 10s: requeue %s, want the deadline to win over the backoff", d.RequeueAfter)
	}
}

// KubeRay v1.7's job status check timeout: the first failed read of the job's status is stored, a
// successful one clears it, and reads failing for the timeout fail the attempt for good (no retry, as for
// DeadlineExceeded), with KubeRay's reason and words.
func TestStatusChecksFailingForTheTimeoutFailTheAttempt(t *testing.T) {
	job := newJob(mode(rayv1.HTTPMode), inState(rayv1.JobDeploymentStatusRunning), func(j *rayv1.RayJob) {
		j.Status.JobStatus = rayv1.JobStatusRunning
		j.Spec.BackoffLimit = ptr.To[int32](3)
	})
	rc := ownedCluster(job, rayv1.Ready)
	o := Observed{Job: job, Cluster: rc, HeadService: HeadService(job, rc, builder.Options{}), JobInfoErr: errors.New("connection refused"),
		DashboardFailures: 1, Now: t0, StatusCheckTimeout: time.Minute}
	d := Next(o)
	if got := d.Status.JobStatusCheckFailureStartTime; got == nil || !got.Time.Equal(t0) || d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning {
		t.Fatalf("first failure: start %v, %s; want it stored and still Running", got, d.Status.JobDeploymentStatus)
	}
	job.Status = d.Status
	o.Job, o.Now, o.DashboardFailures = job, t0.Add(30*time.Second), 5
	if d = Next(o); !d.Status.JobStatusCheckFailureStartTime.Time.Equal(t0) || d.RequeueAfter > 30*time.Second {
		t.Errorf("failing for 30s: start %v, requeue %s; want the first failure's time kept and a wake-up by the timeout", d.Status.JobStatusCheckFailureStartTime, d.RequeueAfter)
	}
	ok := o
	ok.JobInfoErr, ok.JobInfo = nil, &dashboard.JobInfo{Status: rayv1.JobStatusRunning}
	if d := Next(ok); d.Status.JobStatusCheckFailureStartTime != nil {
		t.Errorf("a successful read left the failure start %v", d.Status.JobStatusCheckFailureStartTime)
	}
	o.Now = t0.Add(time.Minute)
	d = Next(o)
	if d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusFailed || d.Status.Reason != rayv1.JobStatusCheckTimeoutExceeded ||
		d.Status.Message != "Job status checks have been failing since 2026-11-30 12:00:00; exceeded timeout of 60s" {
		t.Errorf("after the timeout: %s %s %q", d.Status.JobDeploymentStatus, d.Status.Reason, d.Status.Message)
	}
}

// A K8sJobMode attempt whose submitter still runs is polled at PollInterval however long the dashboard
// fails: its next submitter pod could submit again on a new head, which the poll must see first.
func TestNoBackoffWhileASubmitterRuns(t *testing.T) {
	job := newJob(inState(rayv1.JobDeploymentStatusRunning), func(j *rayv1.RayJob) { j.Status.JobStatus = rayv1.JobStatusRunning })
	rc := ownedCluster(job, rayv1.Ready)
	o := Observed{Job: job, Cluster: rc, HeadService: HeadService(job, rc, builder.Options{}), Head: headPod(rc, "head-uid", 0),
		JobInfoErr: errors.New("timeout"), DashboardFailures: 6, Now: t0}
	o.Submitter = submitterJob(job, "", t0)
	if d := Next(o); d.RequeueAfter != PollInterval || d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning {
		t.Errorf("running submitter: %s requeue %s, want Running and %s", d.Status.JobDeploymentStatus, d.RequeueAfter, PollInterval)
	}
	o.Submitter = submitterJob(job, batchv1.JobComplete, t0)
	if d := Next(o); d.RequeueAfter != pollAfter(6) {
		t.Errorf("finished submitter: requeue %s, want the backoff %s", d.RequeueAfter, pollAfter(6))
	}
}

// KubeRay's operator settings: DELETE_RAYJOB_CR_AFTER_JOB_FINISHES and the transition grace period.
func TestOperatorSettings(t *testing.T) {
	ended := newJob(inState(rayv1.JobDeploymentStatusComplete), func(j *rayv1.RayJob) {
		j.Spec.ShutdownAfterJobFinishes = true
		j.Status.EndTime = ptr.To(metav1.NewTime(t0))
	})
	rc := ownedCluster(ended, rayv1.Ready)
	if d := Next(Observed{Job: ended, Cluster: rc, Now: t0, DeleteRayJobOnShutdown: true}); !cmp.Equal([]ActionKind{DeleteRayJob}, kinds(d.Actions)) {
		t.Errorf("shutdown with DeleteRayJobOnShutdown: %v, want DeleteRayJob", kinds(d.Actions))
	}
	if d := Next(Observed{Job: ended, Cluster: rc, Now: t0}); !cmp.Equal([]ActionKind{DeleteCluster}, kinds(d.Actions)) {
		t.Errorf("shutdown without: %v, want DeleteCluster", kinds(d.Actions))
	}
	users := newJob(inState(rayv1.JobDeploymentStatusComplete), func(j *rayv1.RayJob) {
		j.Spec.RayClusterSpec = nil
		j.Spec.ClusterSelector = map[string]string{constants.LabelCluster: "shared"}
		j.Spec.ShutdownAfterJobFinishes = true
		j.Status.EndTime = ptr.To(metav1.NewTime(t0))
	})
	if d := Next(Observed{Job: users, Now: t0, DeleteRayJobOnShutdown: true}); len(d.Actions) != 0 {
		t.Errorf("selected cluster: %v, want nothing deleted, as with KubeRay", kinds(d.Actions))
	}

	stuck := newJob(inState(rayv1.JobDeploymentStatusRunning), func(j *rayv1.RayJob) {
		j.Status.JobStatus = rayv1.JobStatusSucceeded
		j.Status.RayJobStatusInfo.EndTime = ptr.To(metav1.NewTime(t0))
	})
	rc = ownedCluster(stuck, rayv1.Ready)
	o := Observed{Job: stuck, Cluster: rc, Submitter: submitterJob(stuck, "", t0), Head: headPod(rc, "head-uid", 0),
		HeadService: HeadService(stuck, rc, builder.Options{}), JobInfo: &dashboard.JobInfo{Status: rayv1.JobStatusSucceeded}, Now: t0.Add(time.Minute)}
	if d := Next(o); d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning {
		t.Errorf("a minute after the end, default grace: %s, want Running", d.Status.JobDeploymentStatus)
	}
	o.TransitionGracePeriod = 30 * time.Second
	if d := Next(o); d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete || d.Status.Reason != rayv1.JobDeploymentStatusTransitionGracePeriodExceeded {
		t.Errorf("a minute after the end, grace 30s: %s %s, want Complete with the grace reason", d.Status.JobDeploymentStatus, d.Status.Reason)
	}
}

func TestValidationFailsOnceWithAnEvent(t *testing.T) {
	job := newJob(func(j *rayv1.RayJob) { j.Spec.Suspend = true })
	d := Next(Observed{Job: job, Now: t0})
	want := "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended"
	if d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusValidationFailed || d.Status.Reason != rayv1.ValidationFailed || d.Status.Message != want {
		t.Errorf("got %s %s %q", d.Status.JobDeploymentStatus, d.Status.Reason, d.Status.Message)
	}
	if len(d.Events) != 1 || d.Events[0].Reason != EventInvalidRayJobSpec || d.Events[0].Type != corev1.EventTypeWarning {
		t.Errorf("events = %v, want one InvalidRayJobSpec warning", d.Events)
	}
	job.Status = d.Status
	if d := Next(Observed{Job: job, Now: t0}); len(d.Events) != 0 || len(d.Actions) != 0 {
		t.Errorf("again: events %v actions %v, want none", d.Events, kinds(d.Actions))
	}
}

func deletionRule(p rayv1.DeletionPolicyType, status rayv1.JobStatus, ttl int32) rayv1.DeletionRule {
	return rayv1.DeletionRule{Policy: p, Condition: rayv1.DeletionCondition{JobStatus: &status, TTLSeconds: ttl}}
}

func TestDeletionRules(t *testing.T) {
	job := newJob(inState(rayv1.JobDeploymentStatusComplete), func(j *rayv1.RayJob) {
		j.Status.JobStatus = rayv1.JobStatusSucceeded
		j.Status.EndTime = ptr.To(metav1.NewTime(t0))
		j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{DeletionRules: []rayv1.DeletionRule{
			deletionRule(rayv1.DeleteWorkers, rayv1.JobStatusSucceeded, 10),
			deletionRule(rayv1.DeleteCluster, rayv1.JobStatusSucceeded, 20),
			deletionRule(rayv1.DeleteSelf, rayv1.JobStatusSucceeded, 30),
			deletionRule(rayv1.DeleteSelf, rayv1.JobStatusFailed, 0),
		}}
	})
	rc := ownedCluster(job, rayv1.Ready)
	suspended := rc.DeepCopy()
	for i := range suspended.Spec.WorkerGroupSpecs {
		suspended.Spec.WorkerGroupSpecs[i].Suspend = ptr.To(true)
	}
	tests := []struct {
		name    string
		cluster *rayv1.RayCluster
		at      time.Duration
		gate    bool
		want    []ActionKind
		requeue time.Duration
	}{
		{name: "gate off: nothing", cluster: rc, at: time.Hour, gate: false},
		{name: "before the first rule", cluster: rc, at: 4 * time.Second, gate: true, requeue: 6 * time.Second},
		{name: "workers due", cluster: rc, at: 10 * time.Second, gate: true, want: []ActionKind{SuspendWorkers}, requeue: 10 * time.Second},
		{name: "workers done, cluster not yet", cluster: suspended, at: 15 * time.Second, gate: true, requeue: 5 * time.Second},
		{name: "cluster due", cluster: suspended, at: 20 * time.Second, gate: true, want: []ActionKind{DeleteCluster}, requeue: 10 * time.Second},
		{name: "operator was down: the most impactful overdue rule first", cluster: rc, at: time.Hour, gate: true, want: []ActionKind{DeleteRayJob}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Next(Observed{Job: job, Cluster: tt.cluster, Now: t0.Add(tt.at), DeletionPolicy: tt.gate})
			if !tt.gate {
				if d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusValidationFailed || len(d.Actions) != 0 {
					t.Errorf("gate off: %s actions %v, want ValidationFailed and nothing deleted", d.Status.JobDeploymentStatus, kinds(d.Actions))
				}
				return
			}
			if diff := cmp.Diff(tt.want, kinds(d.Actions)); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if d.RequeueAfter != tt.requeue {
				t.Errorf("requeue %s, want %s", d.RequeueAfter, tt.requeue)
			}
		})
	}
	d := Next(Observed{Job: job, Cluster: rc, Now: t0.Add(10 * time.Second), DeletionPolicy: true})
	for _, g := range d.Actions[0].Cluster.Spec.WorkerGroupSpecs {
		if !ptr.Deref(g.Suspend, false) {
			t.Errorf("group %s not suspended in the update", g.GroupName)
		}
	}
	if rc.Spec.WorkerGroupSpecs[0].Suspend != nil {
		t.Error("the observed cluster was changed in place")
	}
}

func TestLegacyDeletionPolicy(t *testing.T) {
	job := newJob(inState(rayv1.JobDeploymentStatusFailed), func(j *rayv1.RayJob) {
		j.Status.JobStatus = rayv1.JobStatusFailed
		j.Status.EndTime = ptr.To(metav1.NewTime(t0))
		onSuccess, onFailure := rayv1.DeleteNone, rayv1.DeleteCluster
		j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{OnSuccess: &rayv1.DeletionPolicy{Policy: &onSuccess}, OnFailure: &rayv1.DeletionPolicy{Policy: &onFailure}}
	})
	rc := ownedCluster(job, rayv1.Ready)
	if d := Next(Observed{Job: job, Cluster: rc, Now: t0, DeletionPolicy: true}); !cmp.Equal([]ActionKind{DeleteCluster}, kinds(d.Actions)) {
		t.Errorf("failed job, onFailure DeleteCluster: %v", kinds(d.Actions))
	}
	job.Status.JobStatus = rayv1.JobStatusSucceeded
	if d := Next(Observed{Job: job, Cluster: rc, Now: t0, DeletionPolicy: true}); len(d.Actions) != 0 {
		t.Errorf("succeeded job, onSuccess DeleteNone: %v", kinds(d.Actions))
	}
	job.Status.JobStatus = rayv1.JobStatusRunning // failed by a deadline: neither policy applies, as in KubeRay
	if d := Next(Observed{Job: job, Cluster: rc, Now: t0, DeletionPolicy: true}); len(d.Actions) != 0 {
		t.Errorf("job failed while RUNNING: %v", kinds(d.Actions))
	}
}

// preRunningDeadlineSeconds (KubeRay v1.7) fails an attempt still Initializing or Waiting at the deadline
// with PreRunningDeadlineExceeded; before it the RayJob asks to be woken at the deadline; backoffLimit
// decides on a new attempt; a Running job is not held to it.
func TestPreRunningDeadline(t *testing.T) {
	deadline := func(j *rayv1.RayJob) { j.Spec.PreRunningDeadlineSeconds = ptr.To[int32](60) }
	for _, tt := range []struct {
		name  string
		job   *rayv1.RayJob
		retry bool
	}{
		{"Initializing", newJob(deadline, inState(rayv1.JobDeploymentStatusInitializing)), false},
		{"Waiting", newJob(deadline, mode(rayv1.InteractiveMode), inState(rayv1.JobDeploymentStatusWaiting)), false},
		{"Initializing with a retry left", newJob(deadline, inState(rayv1.JobDeploymentStatusInitializing), func(j *rayv1.RayJob) { j.Spec.BackoffLimit = ptr.To[int32](1) }), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := ownedCluster(tt.job, rayv1.Ready)
			rc.Status.State = ""
			if d := Next(Observed{Job: tt.job, Cluster: rc, Now: t0.Add(59 * time.Second)}); d.Status.JobDeploymentStatus != tt.job.Status.JobDeploymentStatus || d.RequeueAfter != time.Second {
				t.Errorf("before the deadline: %s, requeue %s; want unchanged and woken in 1s", d.Status.JobDeploymentStatus, d.RequeueAfter)
			}
			d := Next(Observed{Job: tt.job, Cluster: rc, Now: t0.Add(60 * time.Second)})
			want := rayv1.JobDeploymentStatusFailed
			if tt.retry {
				want = rayv1.JobDeploymentStatusRetrying
			}
			if d.Status.JobDeploymentStatus != want || d.Status.Reason != rayv1.PreRunningDeadlineExceeded ||
				!strings.Contains(d.Status.Message, "has passed the preRunningDeadlineSeconds") {
				t.Errorf("at the deadline: %s %s %q; want %s PreRunningDeadlineExceeded", d.Status.JobDeploymentStatus, d.Status.Reason, d.Status.Message, want)
			}
		})
	}
	running := newJob(deadline, mode(rayv1.HTTPMode), inState(rayv1.JobDeploymentStatusRunning), func(j *rayv1.RayJob) { j.Status.JobStatus = rayv1.JobStatusRunning })
	rc := ownedCluster(running, rayv1.Ready)
	d := Next(Observed{Job: running, Cluster: rc, HeadService: HeadService(running, rc, builder.Options{}), JobInfo: &dashboard.JobInfo{Status: rayv1.JobStatusRunning}, Now: t0.Add(time.Hour)})
	if d.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusRunning {
		t.Errorf("a Running job an hour in: %s %s, want it not held to the pre-running deadline", d.Status.JobDeploymentStatus, d.Status.Reason)
	}
}

// A rule on the deployment status (KubeRay v1.7) fires for a RayJob that ended Failed, whatever its Ray
// job status (here a submission that failed before the Ray job ran), and not for one that completed.
func TestDeletionRulesOnTheDeploymentStatus(t *testing.T) {
	failed := rayv1.JobDeploymentStatusFailed
	rules := func(j *rayv1.RayJob) {
		j.Status.EndTime = ptr.To(metav1.NewTime(t0))
		j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{DeletionRules: []rayv1.DeletionRule{
			{Policy: rayv1.DeleteCluster, Condition: rayv1.DeletionCondition{JobDeploymentStatus: &failed, TTLSeconds: 5}},
		}}
	}
	job := newJob(inState(rayv1.JobDeploymentStatusFailed), rules, func(j *rayv1.RayJob) { j.Status.Reason = rayv1.SubmissionFailed })
	rc := ownedCluster(job, rayv1.Ready)
	if d := Next(Observed{Job: job, Cluster: rc, Now: t0.Add(4 * time.Second), DeletionPolicy: true}); len(d.Actions) != 0 || d.RequeueAfter != time.Second {
		t.Errorf("before its TTL: actions %v requeue %s, want none and 1s", kinds(d.Actions), d.RequeueAfter)
	}
	if d := Next(Observed{Job: job, Cluster: rc, Now: t0.Add(5 * time.Second), DeletionPolicy: true}); !cmp.Equal(kinds(d.Actions), []ActionKind{DeleteCluster}) {
		t.Errorf("at its TTL: actions %v, want DeleteCluster", kinds(d.Actions))
	}
	done := newJob(inState(rayv1.JobDeploymentStatusComplete), rules, func(j *rayv1.RayJob) { j.Status.JobStatus = rayv1.JobStatusSucceeded })
	if d := Next(Observed{Job: done, Cluster: ownedCluster(done, rayv1.Ready), Now: t0.Add(time.Hour), DeletionPolicy: true}); len(d.Actions) != 0 {
		t.Errorf("a completed job: actions %v, want none", kinds(d.Actions))
	}
}
