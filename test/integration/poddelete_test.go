package integration

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/test/poddelete"
)

// boundPod creates a pod already bound to a node, as the scheduler leaves it; deleting it is graceful.
func boundPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:   "kwok-node-0",
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
		},
	}
	NewWithT(t).Expect(k8s.Create(context.Background(), p)).To(Succeed())
	return p
}

// deleteGracefully starts the pod's deletion and returns the pod as a watcher then sees it: still there,
// with a deletion timestamp.
func deleteGracefully(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	g := NewWithT(t)
	g.Expect(k8s.Delete(context.Background(), p)).To(Succeed())
	cur := &corev1.Pod{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(p), cur)).To(Succeed())
	g.Expect(cur.DeletionTimestamp).NotTo(BeNil())
	return cur
}

// A late removal of a deleted pod, asked after an owner made a new pod of the same name (an Advanced
// StatefulSet's head-0), leaves the new pod alone: the request names the old pod's UID. A by-name delete, as
// kwok's delete stage sends, removes the new pod.
func TestALateRemovalNeverRemovesANewPodOfTheSameName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	cs := kubernetes.NewForConfigOrDie(cfg)

	old := deleteGracefully(t, boundPod(t, ns, "head-0"))
	zero := int64(0)
	g.Expect(cs.CoreV1().Pods(ns).Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})).To(Succeed())
	replacement := boundPod(t, ns, "head-0")

	g.Expect(poddelete.Remove(ctx, cs, ns, old.Name, old.UID)).To(Succeed())
	cur := &corev1.Pod{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(replacement), cur)).To(Succeed())
	g.Expect(cur.UID).To(Equal(replacement.UID))
	g.Expect(cur.DeletionTimestamp).To(BeNil())

	// The same late request by name only removes it.
	g.Expect(cs.CoreV1().Pods(ns).Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})).To(Succeed())
	g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(replacement), cur))).To(BeTrue())
}

// Run removes a bound pod once its deletion starts, and never touches a pod nobody deletes.
func TestRunRemovesEachDeletedPod(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	ns := newNamespace(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	done := make(chan error, 1)
	go func() { done <- poddelete.Run(ctx, cs) }()
	t.Cleanup(func() {
		cancel()
		g.Expect(<-done).To(Succeed())
	})

	kept, deleted := boundPod(t, ns, "kept"), boundPod(t, ns, "deleted")
	deleteGracefully(t, deleted)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(deleted), &corev1.Pod{}))
	}, 10*time.Second, 50*time.Millisecond).Should(BeTrue())
	g.Consistently(func() error {
		return k8s.Get(ctx, client.ObjectKeyFromObject(kept), &corev1.Pod{})
	}, time.Second, 100*time.Millisecond).Should(Succeed())
}
