package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycronjob"
	"github.com/kray-project/kray/internal/kuberayref"
	"github.com/kray-project/kray/pkg/constants"
)

// cronJobSample is KubeRay v1.7's RayCronJob sample (schedule "* * * * *") in ns under name, its RayJobs
// suspended so that no cluster starts: what is proven here is which RayJobs the schedule makes.
func cronJobSample(t *testing.T, ns, name string) *rayv1.RayCronJob {
	t.Helper()
	file, err := kuberayref.Path(filepath.Join(kuberayref.SamplesDir, "ray-cronjob.sample.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range splitYAML(data) {
		cj := &rayv1.RayCronJob{}
		if yaml.UnmarshalStrict(doc, cj) == nil && cj.Kind == "RayCronJob" {
			cj.Namespace, cj.Name = ns, name
			cj.Spec.JobTemplate.Suspend = true
			return cj
		}
	}
	t.Fatalf("%s holds no RayCronJob", file)
	return nil
}

// cronRayJobs are the RayJobs in ns that the RayCronJob named name started, by name.
func cronRayJobs(g Gomega, ns, name string) map[string]rayv1.RayJob {
	var l rayv1.RayJobList
	g.Expect(k8s.List(context.Background(), &l, client.InNamespace(ns), client.MatchingLabels{constants.LabelCronJobName: name})).To(Succeed())
	out := map[string]rayv1.RayJob{}
	for _, j := range l.Items {
		out[j.Name] = j
	}
	return out
}

func getCronJob(g Gomega, cj *rayv1.RayCronJob) *rayv1.RayCronJob {
	out := &rayv1.RayCronJob{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(cj), out)).To(Succeed())
	return out
}

// The RayCronJob gate, KubeRay's sample, and what a per-minute schedule makes over two minutes: one RayJob
// per minute with KubeRay's name, label and annotation; none while suspended, then only the latest time on
// resume; after an outage that missed three times, one RayJob, not three; an invalid schedule refused.
func TestRayCronJob(t *testing.T) {
	if !localCluster() {
		t.Skip("restarts the operator with a feature gate through hack/operator.sh")
	}
	g := NewWithT(t)
	ns := namespace(t)
	ctx := context.Background()

	// Gate off (KubeRay's default): the object is stored, and nothing acts on it.
	every := cronJobSample(t, ns, "every-minute")
	g.Expect(k8s.Create(ctx, every)).To(Succeed())
	g.Consistently(func(g Gomega) { g.Expect(getCronJob(g, every).Status.Conditions).To(BeEmpty()) }, 2*time.Second, poll).Should(Succeed())

	hack(t, "operator.sh", "stop")
	t.Cleanup(func() { hack(t, "operator.sh", "stop"); hack(t, "operator.sh", "start") })
	gated := []string{"KRAY_OPERATOR_ARGS=" + os.Getenv("KRAY_OPERATOR_ARGS") + " --feature-gates=RayCronJob=true"}
	hackEnv(t, gated, "operator.sh", "start")

	suspended := cronJobSample(t, ns, "suspended")
	suspended.Spec.Suspend = ptr.To(true)
	g.Expect(k8s.Create(ctx, suspended)).To(Succeed())
	invalid := cronJobSample(t, ns, "invalid")
	invalid.Spec.Schedule = "61 * * * *"
	g.Expect(k8s.Create(ctx, invalid)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(getCronJob(g, invalid).Status.Conditions, rayv1.RayCronJobScheduling)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(raycronjob.EventInvalidRayCronJobSpec))
		g.Expect(eventMessages(g, invalid, raycronjob.EventInvalidRayCronJobSpec)).To(ConsistOf(ContainSubstring(ns + "/invalid: invalid cron schedule: end of range (61) above maximum (59): 61")))
		c = meta.FindStatusCondition(getCronJob(g, suspended).Status.Conditions, rayv1.RayCronJobScheduling)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(raycronjob.EventSuspendedRayCronJob))
	}, readyTimeout, poll).Should(Succeed())

	// The first minute boundary: one RayJob, named, labelled and annotated as KubeRay's.
	var first rayv1.RayJob
	g.Eventually(func(g Gomega) {
		jobs := cronRayJobs(g, ns, every.Name)
		g.Expect(jobs).To(HaveLen(1))
		for _, j := range jobs {
			first = j
		}
	}, 70*time.Second, poll).Should(Succeed())
	at, err := time.Parse(time.RFC3339, first.Annotations[constants.AnnotationCronJobScheduledTimestamp])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(at.Second()).To(BeZero())
	g.Expect(first.Name).To(Equal(raycronjob.JobName(every, at)))
	g.Expect(metav1.IsControlledBy(&first, getCronJob(g, every))).To(BeTrue())
	g.Expect(first.Spec.Entrypoint).To(Equal(every.Spec.JobTemplate.Entrypoint))
	g.Expect(getCronJob(g, every).Status.LastScheduleTime.Time).To(BeTemporally("==", at))

	// An outage that missed three times: the operator stops, the RayCronJob's last run is three minutes
	// back (what three minutes of outage leave), and the restart starts one RayJob, the latest time's.
	hack(t, "operator.sh", "stop")
	outage := cronJobSample(t, ns, "outage")
	g.Expect(k8s.Create(ctx, outage)).To(Succeed())
	outage.Status.LastScheduleTime = &metav1.Time{Time: at.Add(-3 * time.Minute)}
	g.Expect(k8s.Status().Update(ctx, outage)).To(Succeed())
	hackEnv(t, gated, "operator.sh", "start")
	g.Eventually(func(g Gomega) {
		jobs := cronRayJobs(g, ns, outage.Name)
		g.Expect(jobs).To(HaveLen(1))
		g.Expect(jobs).To(HaveKey(raycronjob.JobName(outage, at)))
		g.Expect(eventMessages(g, outage, raycronjob.EventMissedSchedules)).To(ConsistOf(HavePrefix("2 earlier schedule times passed")))
	}, readyTimeout, poll).Should(Succeed())

	// The next minute: one more, and still none for the suspended one; the restart started nothing twice.
	g.Eventually(func(g Gomega) {
		g.Expect(cronRayJobs(g, ns, every.Name)).To(And(HaveLen(2), HaveKey(first.Name), HaveKey(raycronjob.JobName(every, at.Add(time.Minute)))))
	}, 70*time.Second, poll).Should(Succeed())
	// The outage's next time is the same minute's: its RayJob comes at its own wake-up, a moment apart.
	g.Eventually(func(g Gomega) { g.Expect(cronRayJobs(g, ns, outage.Name)).To(HaveLen(2)) }, 10*time.Second, poll).Should(Succeed())
	g.Expect(cronRayJobs(g, ns, suspended.Name)).To(BeEmpty())
	g.Expect(cronRayJobs(g, ns, invalid.Name)).To(BeEmpty())

	// Resumed: the latest time it missed while suspended starts, once.
	cur := getCronJob(g, suspended)
	cur.Spec.Suspend = ptr.To(false)
	g.Expect(k8s.Update(ctx, cur)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(cronRayJobs(g, ns, suspended.Name)).To(And(HaveLen(1), HaveKey(raycronjob.JobName(suspended, at.Add(time.Minute)))))
	}, readyTimeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) { g.Expect(cronRayJobs(g, ns, suspended.Name)).To(HaveLen(1)) }, 2*time.Second, poll).Should(Succeed())
}
