package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/rayjob"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/internal/kuberayref"
	"github.com/kray-project/kray/pkg/constants"
)

// jobTimeout bounds a RayJob's whole run on the local cluster: a cluster start, a submission and the fake
// job's few seconds.
const jobTimeout = 2 * time.Minute

// needFakeDashboard skips a test that runs Ray jobs through the fake Ray dashboard, which only an operator
// running out of cluster (hack/e2e.sh) can reach.
func needFakeDashboard(t *testing.T) {
	t.Helper()
	if dash == nil {
		t.Skip("needs the fake Ray dashboard that hack/e2e.sh serves to an operator running out of cluster")
	}
}

// rayJob is a RayJob in ns on a small cluster (the RayCluster sample's spec with one worker).
func rayJob(t *testing.T, ns, name string, mode rayv1.JobSubmissionMode, edits ...func(*rayv1.RayJob)) *rayv1.RayJob {
	t.Helper()
	spec := loadSample(t, "ray-cluster.sample.yaml", ns).Spec
	spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](1)
	job := &rayv1.RayJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: rayv1.RayJobSpec{SubmissionMode: mode, Entrypoint: fmt.Sprintf("python -c 'print(%q)'", ns+"/"+name),
			RayClusterSpec: &spec},
	}
	for _, e := range edits {
		e(job)
	}
	return job
}

func createJob(t *testing.T, job *rayv1.RayJob) *rayv1.RayJob {
	t.Helper()
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatalf("create RayJob %s: %v", job.Name, err)
	}
	return job
}

func getJob(g Gomega, job *rayv1.RayJob) *rayv1.RayJob {
	out := &rayv1.RayJob{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(job), out)).To(Succeed())
	return out
}

// waitJobState waits until the RayJob's deployment status is state and returns the RayJob.
func waitJobState(t *testing.T, job *rayv1.RayJob, state rayv1.JobDeploymentStatus) *rayv1.RayJob {
	t.Helper()
	var cur *rayv1.RayJob
	NewWithT(t).Eventually(func(g Gomega) {
		cur = getJob(g, job)
		g.Expect(cur.Status.JobDeploymentStatus).To(Equal(state), "status: %+v", cur.Status)
	}, jobTimeout, poll).Should(Succeed())
	return cur
}

// updateJob applies mutate to the latest RayJob, retrying on conflict.
func updateJob(t *testing.T, job *rayv1.RayJob, mutate func(*rayv1.RayJob)) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		cur := getJob(g, job)
		mutate(cur)
		g.Expect(k8s.Update(context.Background(), cur)).To(Succeed())
	}, 10*time.Second, poll).Should(Succeed())
}

// creations records, from a watch started before the test acts, every object of one kind created in a
// namespace: how many RayClusters and submitter Jobs a RayJob made, counted as the pod ledger counts pods.
type creations struct {
	mu    sync.Mutex
	names map[types.UID]string
	stop  func()
}

func watchCreations(t *testing.T, ns string, list client.ObjectList) *creations {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := watcher.Watch(ctx, list, client.InNamespace(ns))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &creations{names: map[types.UID]string{}, stop: func() { cancel(); w.Stop() }}
	t.Cleanup(c.stop)
	go func() {
		for e := range w.ResultChan() {
			if obj, ok := e.Object.(client.Object); ok && (e.Type == watch.Added || e.Type == watch.Modified) {
				c.mu.Lock()
				c.names[obj.GetUID()] = obj.GetName()
				c.mu.Unlock()
			}
		}
	}()
	return c
}

// created returns the names of the objects seen, one per object.
func (c *creations) created() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, n := range c.names {
		out = append(out, n)
	}
	return out
}

// submitterPlayer does in the suite what a submitter pod's container does on a real node, since kwok runs
// no container: for each running pod of a RayJob's submitter Job in ns, it submits the job under the pod's
// RAY_JOB_SUBMISSION_ID to the fake dashboard (`ray job submit`, after `ray job status` found nothing), waits
// until the job ends (`ray job logs --follow`), and then ends the pod with exit code 0; when the dashboard no
// longer knows the job it follows (its head restarted), `ray job logs` fails and so does the pod, exit code 1,
// and the Job's next pod starts over. Errors are kept for the test to check; a goroutine never fails a test.
type submitterPlayer struct {
	mu        sync.Mutex
	errs      []error
	submitted map[types.UID]bool
	done      map[types.UID]bool
}

func playSubmitters(t *testing.T, ns string) *submitterPlayer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &submitterPlayer{submitted: map[types.UID]bool{}, done: map[types.UID]bool{}}
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			p.step(ctx, ns)
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return p
}

func (p *submitterPlayer) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, err)
}

func (p *submitterPlayer) errors() []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]error(nil), p.errs...)
}

func (p *submitterPlayer) step(ctx context.Context, ns string) {
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{batchv1.JobNameLabel}); err != nil {
		return
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
			continue
		}
		p.mu.Lock()
		done, submitted := p.done[pod.UID], p.submitted[pod.UID]
		p.mu.Unlock()
		if done {
			continue
		}
		id, entrypoint, err := submitterJobOf(ctx, pod)
		if apierrors.IsNotFound(err) {
			continue // its Job was deleted: the pod is going, with its container
		}
		if err != nil {
			p.fail(err)
			continue
		}
		if !submitted {
			if !dash.has(id) { // `ray job status` found nothing: submit; otherwise only follow the logs
				if err := dash.submitAs(id, entrypoint); err != nil {
					p.fail(err)
					continue
				}
			}
			p.mu.Lock()
			p.submitted[pod.UID] = true
			p.mu.Unlock()
		}
		exit := int32(0)
		if !dash.has(id) {
			exit = 1 // `ray job logs --follow` lost the job
		} else if _, ended := dash.terminal(id); !ended {
			continue // the container is still following the logs; look again
		}
		cur := pod.DeepCopy()
		now := metav1.Now()
		cur.Status.Phase = corev1.PodSucceeded
		reason := "Completed"
		if exit != 0 {
			cur.Status.Phase, reason = corev1.PodFailed, "Error"
		}
		for c := range cur.Status.ContainerStatuses {
			cur.Status.ContainerStatuses[c].Ready = false
			cur.Status.ContainerStatuses[c].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exit, Reason: reason, StartedAt: now, FinishedAt: now}}
		}
		for c := range cur.Status.Conditions {
			if cur.Status.Conditions[c].Type == corev1.PodReady || cur.Status.Conditions[c].Type == corev1.ContainersReady {
				cur.Status.Conditions[c].Status = corev1.ConditionFalse
			}
		}
		if err := k8s.Status().Update(ctx, cur); err != nil {
			continue // a newer pod version: next round
		}
		p.mu.Lock()
		p.done[pod.UID] = true
		p.mu.Unlock()
	}
}

// submitterJobOf reads the submission id from the submitter pod's environment and the entrypoint from the
// RayJob that owns the pod's Job (or from a custom submitter's arguments), as the real submitter has both.
func submitterJobOf(ctx context.Context, pod *corev1.Pod) (id, entrypoint string, err error) {
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == rayjob.EnvRayJobSubmissionID {
			id = e.Value
		}
	}
	job := &batchv1.Job{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: pod.Labels[batchv1.JobNameLabel]}, job); err != nil {
		return "", "", err
	}
	ref := metav1.GetControllerOf(job)
	if ref == nil || ref.Kind != "RayJob" {
		return "", "", fmt.Errorf("Job %s is not a RayJob's submitter", job.Name)
	}
	rj := &rayv1.RayJob{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, rj); err != nil {
		return "", "", err
	}
	if id == "" {
		return "", "", fmt.Errorf("submitter pod %s has no %s", pod.Name, rayjob.EnvRayJobSubmissionID)
	}
	entrypoint = rj.Spec.Entrypoint
	if args := pod.Spec.Containers[0].Args; entrypoint == "" {
		// A custom submitter (KubeRay's light-weight /submitter) takes the entrypoint after "--".
		for i, a := range args {
			if a == "--" {
				entrypoint = strings.Join(args[i+1:], " ")
			}
		}
	}
	return id, entrypoint, nil
}

// expectOneAttempt checks that a RayJob made exactly one RayCluster and submitted exactly once.
func expectOneAttempt(t *testing.T, clusters *creations, st rayv1.RayJobStatus) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(clusters.created()).To(ConsistOf(st.RayClusterName), "RayClusters created")
	accepted, refused, _ := dash.counts(st.JobId)
	g.Expect(accepted).To(Equal(1), "submissions of %s accepted", st.JobId)
	t.Logf("submission %s: accepted %d, repeated and refused %d", st.JobId, accepted, refused)
}

// An HTTPMode RayJob runs to completion: one cluster, one submission, the status KubeRay reports
// (SUCCEEDED, Complete, start and end times, succeeded 1), and with shutdownAfterJobFinishes the cluster is
// deleted after the job.
func TestRayJobHTTPModeRunsToCompletion(t *testing.T) {
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
	spec := rayJob(t, ns, "http", rayv1.HTTPMode, func(j *rayv1.RayJob) {
		j.Spec.ShutdownAfterJobFinishes = true
		j.Spec.Metadata = map[string]string{"team": "a"}
		j.Spec.RuntimeEnvYAML = "env_vars:\n  A: b\n"
	})
	dash.plan(spec.Spec.Entrypoint, jobPlan{runFor: 8 * time.Second, outcome: rayv1.JobStatusSucceeded}) // long enough to be seen RUNNING
	job := createJob(t, spec)
	g.Eventually(func(g Gomega) {
		g.Expect(getJob(g, job).Status.JobStatus).To(Equal(rayv1.JobStatusRunning))
	}, jobTimeout, poll).Should(Succeed())
	cur := waitJobState(t, job, rayv1.JobDeploymentStatusComplete)
	st := cur.Status
	g.Expect(st.JobStatus).To(Equal(rayv1.JobStatusSucceeded))
	g.Expect(st.Succeeded).To(Equal(ptr.To[int32](1)))
	g.Expect(st.StartTime).NotTo(BeNil())
	g.Expect(st.EndTime).NotTo(BeNil())
	g.Expect(st.RayJobStatusInfo.EndTime).NotTo(BeNil())
	g.Expect(st.DashboardURL).To(Equal(fmt.Sprintf("%s-head-svc.%s.svc.cluster.local:8265", st.RayClusterName, ns)))
	g.Expect(cur.Finalizers).To(ContainElement(constants.FinalizerRayJob))
	g.Eventually(func(g Gomega) {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: st.RayClusterName}, &rayv1.RayCluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the cluster is deleted after the job: %v", err)
	}, readyTimeout, poll).Should(Succeed())
	expectOneAttempt(t, clusters, st)
	g.Expect(eventMessages(g, job, shared.EventCreatedRayCluster)).To(HaveLen(1))
	g.Expect(eventMessages(g, job, rayjob.EventSubmittedRayJob)).To(HaveLen(1))
}

// The default K8sJobMode creates one submitter Job (KubeRay's command and environment); the RayJob is
// Complete once the Ray job succeeded and the submitter finished, and without shutdownAfterJobFinishes the
// cluster stays.
func TestRayJobK8sJobMode(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
	submitters := watchCreations(t, ns, &batchv1.JobList{})
	player := playSubmitters(t, ns)
	job := createJob(t, rayJob(t, ns, "k8sjob", ""))
	cur := waitJobState(t, job, rayv1.JobDeploymentStatusComplete)
	g.Expect(player.errors()).To(BeEmpty())
	g.Expect(cur.Spec.SubmissionMode).To(Equal(rayv1.K8sJobMode), "the CRD default")
	g.Expect(cur.Status.JobStatus).To(Equal(rayv1.JobStatusSucceeded))
	expectOneAttempt(t, clusters, cur.Status)
	g.Expect(submitters.created()).To(ConsistOf("k8sjob"))
	sub := &batchv1.Job{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "k8sjob"}, sub)).To(Succeed())
	c := sub.Spec.Template.Spec.Containers[0]
	g.Expect(c.Name).To(Equal(rayjob.SubmitterContainerName))
	g.Expect(c.Args[0]).To(ContainSubstring("ray job submit --address http://" + cur.Status.DashboardURL + " --no-wait"))
	g.Expect(c.Args[0]).To(HavePrefix("if ! ray job status"))
	g.Expect(sub.Spec.BackoffLimit).To(Equal(ptr.To[int32](2)))
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cur.Status.RayClusterName}, &rayv1.RayCluster{})).To(Succeed())
}

// A failing job is retried on a new cluster until backoffLimit is used up: two attempts, two clusters, two
// submissions, then Failed with AppFailed and failed 2.
func TestRayJobFailureRetriesOnNewClusters(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
	spec := rayJob(t, ns, "flaky", rayv1.HTTPMode, func(j *rayv1.RayJob) { j.Spec.BackoffLimit = ptr.To[int32](1) })
	dash.plan(spec.Spec.Entrypoint, jobPlan{runFor: time.Second, outcome: rayv1.JobStatusFailed})
	job := createJob(t, spec)
	cur := waitJobState(t, job, rayv1.JobDeploymentStatusFailed)
	g.Expect(cur.Status.Reason).To(Equal(rayv1.AppFailed))
	g.Expect(cur.Status.JobStatus).To(Equal(rayv1.JobStatusFailed))
	g.Expect(cur.Status.Failed).To(Equal(ptr.To[int32](2)))
	g.Expect(cur.Status.Message).To(ContainSubstring("exit code 1"))
	names := clusters.created()
	g.Expect(names).To(HaveLen(2), "one cluster per attempt")
	g.Expect(names).To(ContainElement(cur.Status.RayClusterName))
	g.Expect(dash.acceptedWithPrefix("flaky-")).To(HaveLen(2), "one submission per attempt")
	svc := &corev1.Service{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "flaky-head-svc"}, svc)).To(Succeed())
	g.Expect(svc.Spec.Selector).To(HaveKeyWithValue(constants.LabelCluster, cur.Status.RayClusterName),
		"the RayJob's head Service follows the last attempt's cluster")
	g.Expect(eventMessages(g, job, shared.EventUpdatedService)).To(HaveLen(1))
	g.Eventually(func(g Gomega) {
		var list rayv1.RayClusterList
		g.Expect(k8s.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1), "the first attempt's cluster is deleted before the retry")
	}, readyTimeout, poll).Should(Succeed())
}

// activeDeadlineSeconds fails a job that runs too long with DeadlineExceeded, and that is never retried.
func TestRayJobDeadlineExceeded(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	spec := rayJob(t, ns, "slow", rayv1.HTTPMode, func(j *rayv1.RayJob) {
		j.Spec.ActiveDeadlineSeconds = ptr.To[int32](20)
		j.Spec.BackoffLimit = ptr.To[int32](2)
	})
	dash.plan(spec.Spec.Entrypoint, jobPlan{}) // runs until stopped
	job := createJob(t, spec)
	cur := waitJobState(t, job, rayv1.JobDeploymentStatusFailed)
	g.Expect(cur.Status.Reason).To(Equal(rayv1.DeadlineExceeded))
	g.Expect(cur.Status.Message).To(ContainSubstring("ActiveDeadlineSeconds: 20"))
	g.Expect(cur.Status.Failed).To(Equal(ptr.To[int32](1)))
	g.Consistently(func(g Gomega) {
		g.Expect(getJob(g, job).Status.JobDeploymentStatus).To(Equal(rayv1.JobDeploymentStatusFailed))
	}, 3*time.Second, poll).Should(Succeed())
}

// A RayJob created suspended gets no cluster and no pod until it is unsuspended; then it runs to completion.
// Suspending it again while it runs removes its cluster. (TestKueueRunsRayJobs runs the same flow driven by
// the real Kueue.)
func TestRayJobSuspendAndResume(t *testing.T) {
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
	spec := rayJob(t, ns, "queued", rayv1.HTTPMode, func(j *rayv1.RayJob) {
		j.Spec.Suspend = true
		j.Spec.ShutdownAfterJobFinishes = true
	})
	dash.plan(spec.Spec.Entrypoint, jobPlan{runFor: 4 * time.Second, outcome: rayv1.JobStatusSucceeded})
	job := createJob(t, spec)
	waitJobState(t, job, rayv1.JobDeploymentStatusSuspended)
	g.Consistently(func(g Gomega) {
		g.Expect(clusters.created()).To(BeEmpty())
		var pods corev1.PodList
		g.Expect(k8s.List(context.Background(), &pods, client.InNamespace(ns))).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty())
	}, 3*time.Second, poll).Should(Succeed())

	updateJob(t, job, func(j *rayv1.RayJob) { j.Spec.Suspend = false })
	running := waitJobState(t, job, rayv1.JobDeploymentStatusRunning)
	first := running.Status.RayClusterName
	g.Expect(clusters.created()[0]).To(Equal(first))
	g.Expect(getJob(g, job).Status.RayClusterName).NotTo(BeEmpty())

	// Preempted while running: the cluster goes, the status is cleared.
	updateJob(t, job, func(j *rayv1.RayJob) { j.Spec.Suspend = true })
	suspended := waitJobState(t, job, rayv1.JobDeploymentStatusSuspended)
	g.Expect(suspended.Status.RayClusterName).To(BeEmpty())
	g.Eventually(func(g Gomega) {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: first}, &rayv1.RayCluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}, readyTimeout, poll).Should(Succeed())

	// Re-admitted: a new attempt on a new cluster runs to completion.
	updateJob(t, job, func(j *rayv1.RayJob) { j.Spec.Suspend = false })
	done := waitJobState(t, job, rayv1.JobDeploymentStatusComplete)
	g.Expect(done.Status.RayClusterName).NotTo(Equal(first))
	g.Expect(clusters.created()).To(HaveLen(2))
	g.Expect(done.Status.JobStatus).To(Equal(rayv1.JobStatusSucceeded))
}

// clusterSelector runs the job on a RayCluster the user made; the RayJob creates none and deletes nothing.
func TestRayJobOnASelectedCluster(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	shared := create(t, loadSample(t, "ray-cluster.sample.yaml", ns))
	waitReady(t, shared, 2)
	clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
	job := createJob(t, rayJob(t, ns, "selected", rayv1.HTTPMode, func(j *rayv1.RayJob) {
		j.Spec.RayClusterSpec = nil
		j.Spec.ClusterSelector = map[string]string{constants.LabelCluster: shared.Name}
		j.Spec.ShutdownAfterJobFinishes = true
	}))
	cur := waitJobState(t, job, rayv1.JobDeploymentStatusComplete)
	g.Expect(cur.Status.RayClusterName).To(Equal(shared.Name))
	g.Consistently(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(shared), &rayv1.RayCluster{})).To(Succeed())
	}, 3*time.Second, poll).Should(Succeed())
	g.Expect(clusters.created()).To(ConsistOf(shared.Name), "only the user's cluster (seen by the watch) exists")
}

// Deleting a RayJob whose Ray job still runs stops the Ray job first; then the RayJob and its cluster go.
func TestRayJobDeletionStopsTheRayJob(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	spec := rayJob(t, ns, "endless", rayv1.HTTPMode)
	dash.plan(spec.Spec.Entrypoint, jobPlan{})
	job := createJob(t, spec)
	g.Eventually(func(g Gomega) {
		g.Expect(getJob(g, job).Status.JobStatus).To(Equal(rayv1.JobStatusRunning))
	}, jobTimeout, poll).Should(Succeed())
	st := getJob(g, job).Status
	g.Expect(k8s.Delete(context.Background(), job)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), &rayv1.RayJob{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}, readyTimeout, poll).Should(Succeed())
	_, _, stops := dash.counts(st.JobId)
	g.Expect(stops).To(Equal(1))
	status, _ := dash.terminal(st.JobId)
	g.Expect(status).To(Equal(rayv1.JobStatusStopped))
	g.Eventually(func(g Gomega) {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: st.RayClusterName}, &rayv1.RayCluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the garbage collector deletes the RayJob's cluster")
	}, readyTimeout, poll).Should(Succeed())
}

// InteractiveMode waits for the user's job id; the user submits, sets spec.jobId, and the RayJob follows.
func TestRayJobInteractiveMode(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	spec := rayJob(t, ns, "notebook", rayv1.InteractiveMode)
	job := createJob(t, spec)
	waiting := waitJobState(t, job, rayv1.JobDeploymentStatusWaiting)
	g.Expect(waiting.Status.JobId).To(BeEmpty())
	id := "users-own-" + ns
	g.Expect(dash.submitAs(id, spec.Spec.Entrypoint)).To(Succeed())
	updateJob(t, job, func(j *rayv1.RayJob) { j.Spec.JobId = id })
	cur := waitJobState(t, job, rayv1.JobDeploymentStatusComplete)
	g.Expect(cur.Status.JobId).To(Equal(id))
	accepted, _, _ := dash.counts(id)
	g.Expect(accepted).To(Equal(1), "kray submits nothing in InteractiveMode")
}

// A dashboard that does not answer leaves the job Running with the reason in its message; once it answers
// again the job completes. Nothing is counted as a failure.
func TestRayJobDashboardDown(t *testing.T) {
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	spec := rayJob(t, ns, "patient", rayv1.HTTPMode)
	dash.plan(spec.Spec.Entrypoint, jobPlan{runFor: 8 * time.Second, outcome: rayv1.JobStatusSucceeded})
	job := createJob(t, spec)
	g.Eventually(func(g Gomega) {
		g.Expect(getJob(g, job).Status.JobStatus).To(Equal(rayv1.JobStatusRunning))
	}, jobTimeout, poll).Should(Succeed())
	dash.setDown(true)
	t.Cleanup(func() { dash.setDown(false) })
	g.Eventually(func(g Gomega) {
		g.Expect(getJob(g, job).Status.Message).To(ContainSubstring("Cannot read the Ray job's status from the dashboard"))
	}, 30*time.Second, poll).Should(Succeed())
	g.Expect(getJob(g, job).Status.JobDeploymentStatus).To(Equal(rayv1.JobDeploymentStatusRunning))
	dash.setDown(false)
	cur := waitJobState(t, job, rayv1.JobDeploymentStatusComplete)
	g.Expect(ptr.Deref(cur.Status.Failed, 0)).To(BeZero(), "no attempt counted as failed")
	g.Expect(cur.Status.JobStatus).To(Equal(rayv1.JobStatusSucceeded))
}

// An operator SIGKILLed while a job runs neither submits twice nor creates a second cluster when it comes
// back, in both submission modes.
func TestRayJobOperatorKilledMidJob(t *testing.T) {
	needFakeDashboard(t)
	if !localCluster() {
		t.Skip("needs the operator run by hack/operator.sh")
	}
	g := NewWithT(t)
	ns := namespace(t)
	clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
	submitters := watchCreations(t, ns, &batchv1.JobList{})
	player := playSubmitters(t, ns)
	var jobs []*rayv1.RayJob
	for _, mode := range []rayv1.JobSubmissionMode{rayv1.HTTPMode, rayv1.K8sJobMode} {
		spec := rayJob(t, ns, "killed-"+map[rayv1.JobSubmissionMode]string{rayv1.HTTPMode: "http", rayv1.K8sJobMode: "k8s"}[mode], mode)
		dash.plan(spec.Spec.Entrypoint, jobPlan{runFor: 10 * time.Second, outcome: rayv1.JobStatusSucceeded})
		jobs = append(jobs, createJob(t, spec))
	}
	for _, job := range jobs {
		g.Eventually(func(g Gomega) {
			g.Expect(getJob(g, job).Status.JobStatus).To(Equal(rayv1.JobStatusRunning))
		}, jobTimeout, poll).Should(Succeed())
	}
	t.Cleanup(func() { hack(t, "operator.sh", "start") })
	hack(t, "operator.sh", "kill")
	hack(t, "operator.sh", "start")
	for _, job := range jobs {
		cur := waitJobState(t, job, rayv1.JobDeploymentStatusComplete)
		accepted, _, _ := dash.counts(cur.Status.JobId)
		g.Expect(accepted).To(Equal(1), "%s: submissions", job.Name)
	}
	g.Expect(clusters.created()).To(HaveLen(2), "one cluster per RayJob")
	g.Expect(submitters.created()).To(ConsistOf("killed-k8s"))
	g.Expect(player.errors()).To(BeEmpty())
}

// KubeRay's RayJob samples that need no real Ray runtime (no TPU, no custom scheduler, no user-made cluster)
// reach Complete on kray against the fake dashboard, each with one cluster and one submission.
func TestKubeRayRayJobSamplesComplete(t *testing.T) {
	t.Parallel()
	needFakeDashboard(t)
	samples := []string{"ray-job.sample.yaml", "ray-job.shutdown.yaml", "ray-job.resources.yaml",
		"ray-job.custom-head-svc.yaml", "ray-job.light-weight-submitter.yaml", "ray-job.sidecar-mode.yaml"}
	for _, file := range samples {
		t.Run(file, func(t *testing.T) {
			g := NewWithT(t)
			ns := namespace(t)
			clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
			player := playSubmitters(t, ns)
			job := createJob(t, kubeRayJobSample(t, file, ns))
			cur := waitJobState(t, job, rayv1.JobDeploymentStatusComplete)
			g.Expect(player.errors()).To(BeEmpty())
			g.Expect(cur.Status.JobStatus).To(Equal(rayv1.JobStatusSucceeded))
			expectOneAttempt(t, clusters, cur.Status)
		})
	}
}

// kubeRaySamplesDir holds the sample manifests of KubeRay v1.7.0, the newest release, kept as reference
// data (the Go module proxy serves KubeRay's module up to v1.6.1).
func kubeRaySamplesDir(t *testing.T) string {
	t.Helper()
	dir, err := kuberayref.Path(kuberayref.SamplesDir)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// kubeRayJobSample is the RayJob of KubeRay's sample file, placed in ns.
func kubeRayJobSample(t *testing.T, file, ns string) *rayv1.RayJob {
	t.Helper()
	return kubeRaySample(t, file, ns, &rayv1.RayJob{})
}

// kubeRaySample is the first object of T's kind (RayJob, RayService) in KubeRay's sample file, placed in ns;
// kind is an empty object of that type.
func kubeRaySample[T client.Object](t *testing.T, file, ns string, kind T) T {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(kubeRaySamplesDir(t), file))
	if err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeOf(kind).Elem()
	for _, doc := range splitYAML(data) {
		obj := reflect.New(typ).Interface().(T) // a fresh object per document: nothing carries over
		if yaml.Unmarshal(doc, obj) == nil && obj.GetObjectKind().GroupVersionKind().Kind == typ.Name() {
			obj.SetNamespace(ns)
			return obj
		}
	}
	t.Fatalf("%s holds no %s", file, typ.Name())
	return kind
}

// splitYAML splits a multi-document YAML file into its documents.
func splitYAML(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range strings.Split(string(data), "\n---") {
		if strings.TrimSpace(d) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// The RayJob features kray refuses (KubeRay's deletionStrategy sample with the RayJobDeletionPolicy gate
// turned off) are admitted by the CRD, then reported as ValidationFailed with the reason and an
// InvalidRayJobSpec event; nothing is created.
func TestRayJobRefusedFeaturesAreReported(t *testing.T) {
	if !localCluster() {
		t.Skip("restarts the operator with a feature gate through hack/operator.sh")
	}
	hack(t, "operator.sh", "stop")
	t.Cleanup(func() { hack(t, "operator.sh", "stop"); hack(t, "operator.sh", "start") })
	hackEnv(t, []string{"KRAY_OPERATOR_ARGS=" + os.Getenv("KRAY_OPERATOR_ARGS") + " --feature-gates=RayJobDeletionPolicy=false"}, "operator.sh", "start")
	for file, want := range map[string]string{
		"ray-job.deletion-rules.yaml": "RayJobDeletionPolicy feature gate must be enabled to use DeletionStrategy",
	} {
		t.Run(file, func(t *testing.T) {
			g := NewWithT(t)
			ns := namespace(t)
			clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
			job := createJob(t, kubeRayJobSample(t, file, ns))
			cur := waitJobState(t, job, rayv1.JobDeploymentStatusValidationFailed)
			g.Expect(cur.Status.Reason).To(Equal(rayv1.ValidationFailed))
			g.Expect(cur.Status.Message).To(ContainSubstring(want))
			g.Eventually(func(g Gomega) {
				g.Expect(eventMessages(g, job, rayjob.EventInvalidRayJobSpec)).To(ContainElement(ContainSubstring(want)))
			}, readyTimeout, poll).Should(Succeed())
			g.Consistently(func(g Gomega) {
				g.Expect(clusters.created()).To(BeEmpty())
			}, 2*time.Second, poll).Should(Succeed())
		})
	}
}

// With the RayJobDeletionPolicy gate on (its default, as in KubeRay v1.6+), deletionRules fire in order
// after the end: the workers go (their groups suspended), then the cluster, then the RayJob itself.
func TestRayJobDeletionRules(t *testing.T) {
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	job := createJob(t, rayJob(t, ns, "rules", rayv1.HTTPMode, func(j *rayv1.RayJob) {
		j.Spec.DeletionStrategy = &rayv1.DeletionStrategy{DeletionRules: []rayv1.DeletionRule{
			{Policy: rayv1.DeleteWorkers, Condition: rayv1.DeletionCondition{JobStatus: ptr.To(rayv1.JobStatusSucceeded), TTLSeconds: 2}},
			{Policy: rayv1.DeleteCluster, Condition: rayv1.DeletionCondition{JobStatus: ptr.To(rayv1.JobStatusSucceeded), TTLSeconds: 6}},
			{Policy: rayv1.DeleteSelf, Condition: rayv1.DeletionCondition{JobStatus: ptr.To(rayv1.JobStatusSucceeded), TTLSeconds: 10}},
		}}
	}))
	done := waitJobState(t, job, rayv1.JobDeploymentStatusComplete)
	rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: done.Status.RayClusterName}}
	g.Eventually(func(g Gomega) {
		cur := get(g, rc)
		g.Expect(cur.Spec.WorkerGroupSpecs[0].Suspend).To(Equal(ptr.To(true)))
		g.Expect(clusterPods(g, rc, constants.LabelNodeType, constants.NodeTypeWorker)).To(BeEmpty())
		g.Expect(clusterPods(g, rc, constants.LabelNodeType, constants.NodeTypeHead)).To(HaveLen(1))
	}, readyTimeout, poll).Should(Succeed())
	g.Expect(eventMessages(g, job, shared.EventUpdatedRayCluster)).To(HaveLen(1))
	g.Eventually(func(g Gomega) {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(rc), &rayv1.RayCluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		g.Expect(getJob(g, job).Status.JobDeploymentStatus).To(Equal(rayv1.JobDeploymentStatusComplete))
	}, readyTimeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), &rayv1.RayJob{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}, readyTimeout, poll).Should(Succeed())
}
