package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/validation"
)

func workerTemplateLabel(g Gomega, rc *rayv1.RayCluster, key string) string {
	cs := &kruisev1alpha1.CloneSet{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: rc.Namespace, Name: names.WorkerCloneSet(rc.Name, rc.Spec.WorkerGroupSpecs[0].GroupName)}, cs)).To(Succeed())
	return cs.Spec.Template.Labels[key]
}

// Removing a worker group removes its CloneSet and its pods and leaves the other groups alone (KubeRay
// leaves such pods running: its issue #1739).
func TestRemovingAGroupRemovesItsPods(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	second := *sample.Spec.WorkerGroupSpecs[0].DeepCopy()
	second.GroupName = "doomed"
	sample.Spec.WorkerGroupSpecs = append(sample.Spec.WorkerGroupSpecs, second)
	rc := create(t, sample)
	waitReady(t, rc, 4)
	kept := uids(workerPods(g, rc, "workergroup"))
	kept[names.HeadPod(rc.Name)] = headPod(g, rc).UID
	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs = c.Spec.WorkerGroupSpecs[:1] })
	g.Eventually(func(g Gomega) {
		g.Expect(uids(clusterPods(g, rc))).To(Equal(kept))
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: names.WorkerCloneSet(rc.Name, "doomed")}, &kruisev1alpha1.CloneSet{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}, readyTimeout, poll).Should(Succeed())
	waitReady(t, rc, 2)
}

// exitRayContainer makes the pod's Ray container look terminated (and restarted once, as the kubelet
// would under restartPolicy Always) while the pod stays Running.
func exitRayContainer(g Gomega, p *corev1.Pod) {
	cur := &corev1.Pod{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(p), cur)).To(Succeed())
	now := metav1.Now()
	ray := cur.Spec.Containers[0].Name
	found := false
	for i := range cur.Status.ContainerStatuses {
		if cur.Status.ContainerStatuses[i].Name == ray {
			found = true
			cur.Status.ContainerStatuses[i].RestartCount = 1
			cur.Status.ContainerStatuses[i].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: now, FinishedAt: now}}
		}
	}
	g.Expect(found).To(BeTrue(), "pod %s has no status for container %s", p.Name, ray)
	g.Expect(k8s.Status().Update(context.Background(), cur)).To(Succeed())
}

// restartPolicy Never keeps its meaning although Kruise runs pods with Always: a worker whose Ray
// container exited is replaced by a fresh pod and an event says so; under Always only the container restarts.
func TestRestartPolicyNeverReplacesExitedWorkers(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	sample.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](1)
	sample.Spec.WorkerGroupSpecs[0].Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	always := *sample.Spec.WorkerGroupSpecs[0].DeepCopy()
	always.GroupName = "always"
	always.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	sample.Spec.WorkerGroupSpecs = append(sample.Spec.WorkerGroupSpecs, always)
	rc := create(t, sample)
	waitReady(t, rc, 2)
	never, kept := workerPods(g, rc, "workergroup")[0], workerPods(g, rc, "always")[0]
	g.Expect(never.Spec.RestartPolicy).To(Equal(corev1.RestartPolicyAlways), "Kruise only runs Always")

	exitRayContainer(g, &never)
	exitRayContainer(g, &kept)
	g.Eventually(func(g Gomega) {
		pods := workerPods(g, rc, "workergroup")
		g.Expect(pods).To(HaveLen(1))
		g.Expect(pods[0].UID).NotTo(Equal(never.UID))
		g.Expect(eventMessages(g, rc, raycluster.EventDeletedWorkerPod)).To(ContainElement(ContainSubstring("restartPolicy Never")))
	}, readyTimeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(uids(workerPods(g, rc, "always"))).To(HaveKeyWithValue(kept.Name, kept.UID))
	}, 2*time.Second, poll).Should(Succeed())
	g.Expect(eventMessages(g, rc, validation.EventRestartPolicySubstituted)).To(ContainElement(ContainSubstring("worker group workergroup asks for restartPolicy Never")))
}

func workerTemplateImage(g Gomega, rc *rayv1.RayCluster) string {
	cs := &kruisev1alpha1.CloneSet{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: rc.Namespace, Name: names.WorkerCloneSet(rc.Name, rc.Spec.WorkerGroupSpecs[0].GroupName)}, cs)).To(Succeed())
	return cs.Spec.Template.Spec.Containers[0].Image
}
