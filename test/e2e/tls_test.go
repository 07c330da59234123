package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/names"
)

// requireCertManager skips a test when cert-manager does not run beside the suite's operator.
func requireCertManager(t *testing.T) {
	t.Helper()
	if os.Getenv("KRAY_E2E_CERT_MANAGER") != "1" {
		t.Skip("needs the cert-manager controller that hack/e2e.sh starts (KRAY_E2E_CERT_MANAGER=1)")
	}
}

// issuedCertificate is the certificate and CA cert-manager wrote into the Secret name, parsed; it fails g
// until the Secret holds all three keys.
func issuedCertificate(g Gomega, ns, name string) (*x509.Certificate, *x509.CertPool) {
	secret := &corev1.Secret{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, secret)).To(Succeed())
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
		g.Expect(secret.Data).To(HaveKey(k))
	}
	block, _ := pem.Decode(secret.Data["tls.crt"])
	g.Expect(block).NotTo(BeNil())
	cert, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(secret.Data["ca.crt"])).To(BeTrue())
	return cert, pool
}

// ipStrings are a certificate's IP SANs.
func ipStrings(cert *x509.Certificate) []string {
	var out []string
	for _, ip := range cert.IPAddresses {
		out = append(out, ip.String())
	}
	return out
}

// KubeRay v1.7's mTLS sample under the real cert-manager: the cluster becomes ready once cert-manager has
// issued a CA and the head's and workers' certificates; each names its pods' IPs (a new worker's too) and,
// the head's, the head Service; both verify with the cluster's CA for server and client use; the pods mount
// them with Ray's variables; and deleting the cluster deletes every Secret with a private key.
func TestTLSClusterCertificatesIssuedByCertManager(t *testing.T) {
	t.Parallel()
	requireCertManager(t)
	g := NewWithT(t)
	ns := namespace(t)
	rc := create(t, kubeRaySample(t, "ray-cluster.mtls.yaml", ns, &rayv1.RayCluster{}))
	waitReady(t, rc, 1)
	rc = get(g, rc)

	for _, kind := range []struct {
		gvkKind string
		name    string
	}{
		{"Issuer", names.TLSSelfSignedIssuer(rc.Name)}, {"Issuer", names.TLSCAIssuer(rc.Name)},
		{"Certificate", names.TLSCACertificate(rc.Name)}, {"Certificate", names.TLSHeadCertificate(rc.Name)}, {"Certificate", names.TLSWorkerCertificate(rc.Name)},
	} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(builder.CertificateGVK.GroupVersion().WithKind(kind.gvkKind))
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: kind.name}, u)).To(Succeed())
		g.Expect(u.GetOwnerReferences()).To(ContainElement(HaveField("UID", rc.UID)), "%s %s", kind.gvkKind, kind.name)
	}

	verify := func(g Gomega, secret string, pod *corev1.Pod, dns string) {
		cert, pool := issuedCertificate(g, ns, secret)
		g.Expect(ipStrings(cert)).To(ContainElements(pod.Status.PodIP, "127.0.0.1"), "Secret %s", secret)
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			_, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}})
			g.Expect(err).NotTo(HaveOccurred(), "Secret %s for %v", secret, usage)
		}
		if dns != "" {
			g.Expect(cert.VerifyHostname(dns)).To(Succeed())
		}
		g.Expect(cert.VerifyHostname(pod.Status.PodIP)).To(Succeed())
	}
	head := headPod(g, rc)
	g.Expect(head.Status.PodIP).NotTo(BeEmpty())
	workers := workerPods(g, rc, "small-group")
	g.Expect(workers).To(HaveLen(1))
	g.Eventually(func(g Gomega) {
		verify(g, names.TLSHeadSecret(rc.Name), head, names.HeadServiceFor(rc)+"."+ns+".svc.cluster.local")
		verify(g, names.TLSWorkerSecret(rc.Name), &workers[0], "")
	}, readyTimeout, poll).Should(Succeed())

	for _, p := range []corev1.Pod{*head, workers[0]} {
		g.Expect(p.Spec.InitContainers[0].Name).To(Equal(builder.TLSWaitContainerName), p.Name)
		ray := p.Spec.Containers[0]
		g.Expect(ray.Env).To(ContainElement(corev1.EnvVar{Name: "RAY_USE_TLS", Value: "1"}), p.Name)
		g.Expect(ray.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "ray-tls", MountPath: "/etc/ray/tls", ReadOnly: true}), p.Name)
	}

	// A second worker: its IP joins the workers' certificate, which cert-manager reissues.
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](2)
		c.Spec.WorkerGroupSpecs[0].MaxReplicas = ptr.To[int32](2)
	})
	waitReady(t, rc, 2)
	g.Eventually(func(g Gomega) {
		cert, _ := issuedCertificate(g, ns, names.TLSWorkerSecret(rc.Name))
		for _, w := range workerPods(g, rc, "small-group") {
			g.Expect(w.Status.PodIP).NotTo(BeEmpty())
			g.Expect(slices.ContainsFunc(cert.IPAddresses, func(ip net.IP) bool { return ip.String() == w.Status.PodIP })).To(BeTrue(), "worker %s", w.Name)
		}
	}, readyTimeout, poll).Should(Succeed())

	// Deleting the cluster deletes the Secrets, private keys and all.
	caSecret := names.TLSCASecret(rc.Name, string(rc.UID))
	g.Expect(k8s.Delete(context.Background(), rc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, s := range []string{caSecret, names.TLSHeadSecret(rc.Name), names.TLSWorkerSecret(rc.Name)} {
			err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: s}, &corev1.Secret{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Secret %s: %v", s, err)
		}
	}, readyTimeout, poll).Should(Succeed())
}
