package e2e

import (
	"context"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	sample.Spec.HeadGroupSpec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways // as in the seed report
	rc := create(t, sample)
	waitReady(t, rc, 2)
	old := headPod(g, rc)
	workers := uids(workerPods(g, rc, "workergroup"))

	seen := watchCondition(t, rc, string(rayv1.HeadPodReady))
	evict(g, old)
	g.Eventually(func(g Gomega) {
		p := headPod(g, rc)
		g.Expect(p.UID).NotTo(Equal(old.UID))
		g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(podReady(p)).To(BeTrue())
		g.Expect(condition(get(g, rc), string(rayv1.HeadPodReady)).Status).To(Equal(metav1.ConditionTrue))
	}, readyTimeout, poll).Should(Succeed())
	g.Eventually(seen, readyTimeout, poll).Should(ContainElements(metav1.ConditionFalse, metav1.ConditionTrue),
		"HeadPodReady must go False while the head is down and True again")
	g.Expect(uids(workerPods(g, rc, "workergroup"))).To(Equal(workers), "worker pods must be untouched")
}

// watchCondition records, from a watch started now, every status of condition t that rc's status writes
// carry, so a transition shorter than any poll interval is still seen. It returns a snapshot function.
func watchCondition(t *testing.T, rc *rayv1.RayCluster, ct string) func() []metav1.ConditionStatus {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := watcher.Watch(ctx, &rayv1.RayClusterList{}, client.InNamespace(rc.Namespace), client.MatchingFields{"metadata.name": rc.Name})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []metav1.ConditionStatus
	go func() {
		for ev := range w.ResultChan() {
			if cur, ok := ev.Object.(*rayv1.RayCluster); ok {
				if c := condition(cur, ct); c != nil {
					mu.Lock()
					if len(seen) == 0 || seen[len(seen)-1] != c.Status {
						seen = append(seen, c.Status)
					}
					mu.Unlock()
				}
			}
		}
	}()
	return func() []metav1.ConditionStatus {
		mu.Lock()
		defer mu.Unlock()
		return append([]metav1.ConditionStatus(nil), seen...)
	}
}

// An evicted worker is replaced by its CloneSet and the dead pod is removed by kray; replicas stay the
// same and no healthy pod is deleted.
func TestEvictedWorkerIsReplaced(t *testing.T) {
	t.Parallel()
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
