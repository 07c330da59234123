package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// evict makes a running pod look the way the kubelet leaves an evicted one: phase Failed, reason Evicted,
// a DisruptionTarget condition and every container terminated. kwok has no stage for it, so it sticks.
func evict(g Gomega, p *corev1.Pod) {
	cur := p.DeepCopy()
	now := metav1.Now()
	cur.Status.Phase = corev1.PodFailed
	cur.Status.Reason = "Evicted"
	cur.Status.Message = "The node was low on resource: memory."
	cur.Status.Conditions = append(cur.Status.Conditions, corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet",
		Message: "The node was low on resource: memory.", LastTransitionTime: now,
	})
	for i := range cur.Status.Conditions {
		if cur.Status.Conditions[i].Type == corev1.PodReady || cur.Status.Conditions[i].Type == corev1.ContainersReady {
			cur.Status.Conditions[i].Status = corev1.ConditionFalse
			cur.Status.Conditions[i].Reason = "PodFailed"
		}
	}
	for i := range cur.Status.ContainerStatuses {
		cur.Status.ContainerStatuses[i].Ready = false
		cur.Status.ContainerStatuses[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: "Error", StartedAt: now, FinishedAt: now,
		}}
	}
	g.Expect(k8s.Status().Update(context.Background(), cur)).To(Succeed())
}

// The seed bug: a head pod evicted by the kubelet is replaced by a new <cluster>-head-0, HeadPodReady goes
// False and back to True, and the workers are untouched.
func TestEvictedHeadIsReplaced(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	sample.Spec.HeadGroupSpec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways // as in the seed report
	rc := create(t, sample)
	waitReady(t, rc, 2)
	old := headPod(g, rc)
	workers := uids(workerPods(g, rc, "workergroup"))

	evict(g, old)
	sawNotReady := false
	g.Eventually(func(g Gomega) {
		if c := condition(get(g, rc), string(rayv1.HeadPodReady)); c != nil && c.Status == metav1.ConditionFalse {
			sawNotReady = true
		}
		p := headPod(g, rc)
		g.Expect(p.UID).NotTo(Equal(old.UID))
		g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(podReady(p)).To(BeTrue())
		g.Expect(condition(get(g, rc), string(rayv1.HeadPodReady)).Status).To(Equal(metav1.ConditionTrue))
	}, readyTimeout, poll).Should(Succeed())
	g.Expect(sawNotReady || headNotReadyRecorded(g, rc)).To(BeTrue(), "HeadPodReady must have gone False while the head was down")
	g.Expect(uids(workerPods(g, rc, "workergroup"))).To(Equal(workers), "worker pods must be untouched")
}

// headNotReadyRecorded reports whether HeadPodReady's last transition happened after the cluster became
// ready the first time, i.e. it went False and came back.
func headNotReadyRecorded(g Gomega, rc *rayv1.RayCluster) bool {
	cur := get(g, rc)
	ready := cur.Status.StateTransitionTimes[rayv1.Ready]
	c := condition(cur, string(rayv1.HeadPodReady))
	return ready != nil && c != nil && c.LastTransitionTime.After(ready.Time)
}

// An evicted worker is replaced by its CloneSet and the dead pod is removed by kray; replicas stay the
// same and no healthy pod is deleted.
func TestEvictedWorkerIsReplaced(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	rc := create(t, loadSample(t, "ray-cluster.sample.yaml", ns))
	waitReady(t, rc, 2)
	before := workerPods(g, rc, "workergroup")
	victim, survivor := before[0], before[1]
	evict(g, &victim)
	g.Eventually(func(g Gomega) {
		pods := uids(workerPods(g, rc, "workergroup"))
		g.Expect(pods).NotTo(HaveKey(victim.Name), "the dead pod must be removed")
		g.Expect(pods).To(HaveKeyWithValue(survivor.Name, survivor.UID))
		g.Expect(pods).To(HaveLen(2))
	}, readyTimeout, poll).Should(Succeed())
	waitReady(t, rc, 2)
	g.Expect(*get(g, rc).Spec.WorkerGroupSpecs[0].Replicas).To(Equal(int32(2)))
	g.Expect(ledger.deletedNames(t, rc)).To(ConsistOf(victim.Name))
}
