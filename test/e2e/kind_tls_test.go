package e2e

import (
	"bytes"
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/pkg/names"
)

// secretData reads one key of a Secret of ns.
func secretData(g Gomega, ns, name, key string) []byte {
	s := &corev1.Secret{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
	g.Expect(s.Data).To(HaveKey(key))
	return s.Data[key]
}

// mTLS on real kubelets with the real cert-manager: every pod starts once its certificate names its IP
// (wait-for-tls-ip-san, with openssl), the fake Ray's GCS and raylets speak gRPC only over mutual TLS with
// those certificates, and kray drains a worker through it. Then the cluster's CA is replaced and the head's
// certificate reissued under it while the running GCS keeps the one it loaded at start (as Ray does): kray's
// next drain fails with a Warning that says so, and the worker is still released after the drain timeout.
func TestKindTLSClusterDrainsOverMutualTLS(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	ns := kindNamespace(t)
	rc := kindRayCluster(ns, "mtls", 2)
	rc.Spec.TLSOptions = &rayv1.TLSOptions{Enabled: ptr.To(true)}
	rc.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{TimeoutSeconds: ptr.To[int32](20)}
	create(t, rc)
	waitKindReady(t, rc, 2)
	rc = get(g, rc)
	for _, p := range clusterPods(g, rc) {
		g.Expect(p.Status.InitContainerStatuses).NotTo(BeEmpty())
		wait := p.Status.InitContainerStatuses[0]
		g.Expect(wait.Name).To(Equal("wait-for-tls-ip-san"), p.Name)
		g.Expect(wait.State.Terminated).NotTo(BeNil(), p.Name)
		g.Expect(wait.State.Terminated.ExitCode).To(BeZero(), p.Name)
	}

	// A drain through the GCS over mutual TLS.
	workers := workerPods(g, rc, "workergroup")
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](1)
		c.Spec.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete = []string{workers[0].Name}
	})
	g.Eventually(func(g Gomega) {
		g.Expect(eventMessages(g, rc, raycluster.EventDrainedWorker)).To(ContainElement(ContainSubstring(workers[0].Name)))
	}, kindTimeout, time.Second).Should(Succeed())
	g.Expect(eventMessages(g, rc, raycluster.EventDrainingWorker)).To(ContainElement(
		MatchRegexp(workers[0].Name + `: asked Ray to drain node [0-9a-f]+`)))
	g.Expect(eventCount(g, rc, raycluster.EventDrainFailed)).To(BeZero())
	waitKindReady(t, rc, 1)

	// A new CA, and the head's certificate reissued under it; the running GCS still serves the old one.
	caSecret := names.TLSCASecret(rc.Name, string(rc.UID))
	oldCA := secretData(g, ns, caSecret, "ca.crt")
	g.Expect(k8s.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: caSecret}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(bytes.Equal(secretData(g, ns, caSecret, "ca.crt"), oldCA)).To(BeFalse())
	}, kindTimeout, time.Second).Should(Succeed())
	headSecret := names.TLSHeadSecret(rc.Name)
	g.Expect(k8s.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: headSecret}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(bytes.Equal(secretData(g, ns, headSecret, "ca.crt"), oldCA)).To(BeFalse())
	}, kindTimeout, time.Second).Should(Succeed())

	last := workerPods(g, rc, "workergroup")[0]
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](0)
		c.Spec.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete = []string{last.Name}
	})
	g.Eventually(func(g Gomega) {
		g.Expect(eventMessages(g, rc, raycluster.EventDrainFailed)).To(ContainElement(And(
			ContainSubstring(last.Name), ContainSubstring("does not verify with the cluster's CA"))))
	}, kindTimeout, time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(workerPods(g, rc, "workergroup")).To(BeEmpty())
	}, kindTimeout, time.Second).Should(Succeed())
	expectOperatorNeverForbidden(t)
}
