package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/names"
)

// failedAttempts records, from a watch started before the test acts, the message of every failed attempt of
// each RayJob in a namespace (a status with reason AppFailed), however briefly it was stored.
type failedAttempts struct {
	mu   sync.Mutex
	msgs map[string][]string
}

func watchFailedAttempts(t *testing.T, ns string) *failedAttempts {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := watcher.Watch(ctx, &rayv1.RayJobList{}, client.InNamespace(ns))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	f := &failedAttempts{msgs: map[string][]string{}}
	t.Cleanup(func() { cancel(); w.Stop() })
	go func() {
		for e := range w.ResultChan() {
			job, ok := e.Object.(*rayv1.RayJob)
			if !ok || e.Type == watch.Deleted || job.Status.Reason != rayv1.AppFailed {
				continue
			}
			f.mu.Lock()
			if m := f.msgs[job.Name]; len(m) == 0 || m[len(m)-1] != job.Status.Message {
				f.msgs[job.Name] = append(m, job.Status.Message)
			}
			f.mu.Unlock()
		}
	}()
	return f
}

func (f *failedAttempts) of(name string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.msgs[name]...)
}

// A Ray head restarted without GCS fault tolerance forgets its jobs. Here the head pod of a running job is
// deleted (the Advanced StatefulSet makes a new one), the dashboard forgets the job and does not answer
// until the new head is up, in HTTPMode, in
// SidecarMode (whose head container only follows the job) and in K8sJobMode, where the submitter pod
// following the job then fails and the submitter Job would start another that submits again. Each attempt is submitted once: the lost one fails with a message that says so, and
// backoffLimit runs a second attempt on a new cluster, which completes.
func TestRayJobHeadReplacedMidJob(t *testing.T) {
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
	submitters := watchCreations(t, ns, &batchv1.JobList{})
	failures := watchFailedAttempts(t, ns)
	player := playSubmitters(t, ns)
	var jobs []*rayv1.RayJob
	earlier := map[string]int{} // the fake dashboard serves the whole run: submissions of a repeated test
	modes := map[string]rayv1.JobSubmissionMode{"lost-http": rayv1.HTTPMode, "lost-k8s": rayv1.K8sJobMode, "lost-sidecar": rayv1.SidecarMode}
	for name, mode := range modes {
		earlier[name] = len(dash.acceptedWithPrefix(name + "-"))
		spec := rayJob(t, ns, name, mode, func(j *rayv1.RayJob) { j.Spec.BackoffLimit = ptr.To[int32](1) })
		dash.plan(spec.Spec.Entrypoint, jobPlan{runFor: 6 * time.Second, outcome: rayv1.JobStatusSucceeded})
		jobs = append(jobs, createJob(t, spec))
	}
	first := map[string]rayv1.RayJobStatus{}
	for _, job := range jobs {
		g.Eventually(func(g Gomega) {
			first[job.Name] = getJob(g, job).Status
			g.Expect(first[job.Name].JobStatus).To(Equal(rayv1.JobStatusRunning))
		}, jobTimeout, poll).Should(Succeed())
	}
	// The new heads' dashboards answer only once Ray has started: until then kray cannot hear that the jobs
	// are gone, and only K8sJobMode, whose submitter records the head it was made for, sees the new head.
	dash.setDown(true)
	t.Cleanup(func() { dash.setDown(false) })
	for _, job := range jobs {
		st := first[job.Name]
		head := &corev1.Pod{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: names.HeadPod(st.RayClusterName)}, head)).To(Succeed())
		g.Expect(k8s.Delete(context.Background(), head)).To(Succeed())
		dash.forget(st.JobId)
		g.Eventually(func(g Gomega) {
			replaced := &corev1.Pod{}
			g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: head.Name}, replaced)).To(Succeed())
			g.Expect(replaced.UID).NotTo(Equal(head.UID), "the Advanced StatefulSet replaces the head")
		}, readyTimeout, poll).Should(Succeed())
	}
	g.Eventually(func(g Gomega) {
		g.Expect(failures.of("lost-k8s")).NotTo(BeEmpty())
	}, readyTimeout, poll).Should(Succeed(), "K8sJobMode fails the attempt on the new head alone")
	g.Expect(failures.of("lost-http")).To(BeEmpty(), "HTTPMode cannot know before the dashboard answers")
	dash.setDown(false)
	for _, job := range jobs {
		cur := waitJobState(t, job, rayv1.JobDeploymentStatusComplete)
		st, was := cur.Status, first[job.Name]
		g.Expect(st.Failed).To(Equal(ptr.To[int32](1)), "%s: the lost attempt failed", job.Name)
		g.Expect(st.Succeeded).To(Equal(ptr.To[int32](1)), "%s: the second attempt succeeded", job.Name)
		g.Expect(st.RayClusterName).NotTo(Equal(was.RayClusterName), "%s: the retry runs on a new cluster", job.Name)
		for _, id := range []string{was.JobId, st.JobId} {
			accepted, _, _ := dash.counts(id)
			g.Expect(accepted).To(Equal(1), "%s: submissions of %s", job.Name, id)
		}
		g.Expect(dash.acceptedWithPrefix(job.Name+"-")).To(HaveLen(earlier[job.Name]+2), "%s: one submission per attempt", job.Name)
		msgs := failures.of(job.Name)
		g.Expect(msgs).To(HaveLen(1), "%s: failed attempts", job.Name)
		want := "is no longer on RayCluster " + ns + "/" + was.RayClusterName // the dashboard's 404
		if job.Spec.SubmissionMode == rayv1.K8sJobMode {
			want = "The Ray head of RayCluster " + ns + "/" + was.RayClusterName + " was restarted"
		}
		g.Expect(msgs[0]).To(ContainSubstring(want), "%s: the failure says the cluster lost the job", job.Name)
		t.Logf("%s: the lost attempt failed with %q", job.Name, msgs[0])
	}
	g.Expect(clusters.created()).To(HaveLen(2*len(modes)), "two clusters per RayJob, one per attempt")
	g.Expect(submitters.created()).To(ConsistOf("lost-k8s", "lost-k8s"), "one submitter Job per K8sJobMode attempt")
	g.Expect(player.errors()).To(BeEmpty())
}
