package raycluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
)

// tlsEnv is an env whose operator serves spec.tlsOptions with cert-manager served.
func tlsEnv(t *testing.T, objs ...client.Object) *env {
	t.Helper()
	e := gatedEnv(t, "RayClusterMTLS=true", objs...)
	e.r.Validation.CertManager = true
	e.r.MTLS = true
	return e
}

// certificate reads a cert-manager Certificate from the fake API server.
func (e *env) certificate(name string) *unstructured.Unstructured {
	e.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(builder.CertificateGVK)
	return e.get(u, name).(*unstructured.Unstructured)
}

// issue plays cert-manager for a Certificate: its Secret is written and it is Ready at its generation.
func (e *env) issue(name string) {
	e.t.Helper()
	cert := e.certificate(name)
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: secretName},
		Data: map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k"), "ca.crt": []byte("ca")}}
	if err := e.api.Create(context.Background(), secret); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	_ = unstructured.SetNestedSlice(cert.Object, []any{map[string]any{
		"type": "Ready", "status": "True", "observedGeneration": cert.GetGeneration(),
	}}, "status", "conditions")
	if err := e.api.Update(context.Background(), cert); err != nil {
		e.t.Fatal(err)
	}
}

// A new TLS cluster: the five cert-manager objects first, and no workload until cert-manager has issued the
// node certificates (a wait, not a failure); then the workloads, and each Secret owned by its Certificate.
// Pods' IPs reach their Certificate, which is reissued; kray presents the head's certificate to the GCS.
func TestTLSClusterWaitsForItsCertificates(t *testing.T) {
	rc := cluster("c").group("g", 2).with(func(rc *rayv1.RayCluster) {
		rc.Spec.TLSOptions = &rayv1.TLSOptions{Enabled: ptr.To(true)}
	}).obj()
	e := tlsEnv(t, rc)
	writes, res, err := e.reconcile(rc)
	if err != nil {
		t.Fatalf("a cluster waiting for its certificates failed: %v", err)
	}
	want := []string{"create Issuer/ray-selfsigned-issuer-c", "create Certificate/ray-ca-certificate-c", "create Issuer/ray-ca-issuer-c",
		"create Certificate/ray-head-cert-c", "create Certificate/ray-worker-cert-c"}
	for _, w := range want {
		if !slices.Contains(writes, w) {
			t.Errorf("writes %v lack %s", writes, w)
		}
	}
	if slices.ContainsFunc(writes, func(w string) bool { return w == "create StatefulSet/c-head" || w == "create CloneSet/c-g-worker" }) {
		t.Errorf("workloads created before the certificates were issued: %v", writes)
	}
	if res.RequeueAfter != certificatesRetry {
		t.Errorf("requeue %v, want %v", res.RequeueAfter, certificatesRetry)
	}
	if got := reasons(e.takeEvents()); !slices.Contains(got, EventMTLSCertsNotReady) {
		t.Errorf("events %v lack %s", got, EventMTLSCertsNotReady)
	}
	stored := e.get(&rayv1.RayCluster{}, "c").(*rayv1.RayCluster)
	for _, c := range stored.Status.Conditions {
		if c.Status == metav1.ConditionTrue && c.Type == string(rayv1.RayClusterReplicaFailure) {
			t.Errorf("waiting reported as a failure: %+v", c)
		}
	}

	e.issue("ray-head-cert-c")
	if writes := e.mustReconcile(rc); slices.Contains(writes, "create StatefulSet/c-head") {
		t.Fatalf("created the head with only the head's certificate: %v", writes)
	}
	e.issue("ray-worker-cert-c")
	e.converge(rc)
	if got := reasons(e.takeEvents()); !slices.Contains(got, EventMTLSPKIReady) {
		t.Errorf("events %v lack %s", got, EventMTLSPKIReady)
	}
	for _, s := range []string{"ray-head-secret-c", "ray-worker-secret-c"} {
		secret := e.get(&corev1.Secret{}, s).(*corev1.Secret)
		if refs := secret.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Certificate" {
			t.Errorf("Secret %s owner references %v, want its Certificate", s, refs)
		}
	}

	// The pods get IPs: each Certificate names its pods' IPs, and is reissued.
	list := &corev1.PodList{}
	if err := e.api.List(context.Background(), list, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		p := &list.Items[i]
		p.Status.PodIP = "10.0.0." + string(rune('1'+i))
		if err := e.api.Status().Update(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	writes = e.mustReconcile(rc)
	for _, w := range []string{"patch Certificate/ray-head-cert-c", "patch Certificate/ray-worker-cert-c"} {
		if !slices.Contains(writes, w) {
			t.Errorf("writes %v lack %s", writes, w)
		}
	}
	ips, _, _ := unstructured.NestedStringSlice(e.certificate("ray-worker-cert-c").Object, "spec", "ipAddresses")
	if len(ips) != 3 || ips[2] != "127.0.0.1" {
		t.Errorf("worker IP SANs %v, want the two workers' IPs and 127.0.0.1", ips)
	}
	if err := e.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "c-head"}, &kruisev1beta1.StatefulSet{}); err != nil {
		t.Fatalf("head StatefulSet: %v", err)
	}
	if writes := e.mustReconcile(rc); slices.ContainsFunc(writes, func(w string) bool { return w == "patch Certificate/ray-worker-cert-c" }) {
		t.Errorf("a settled Certificate is rewritten: %v", writes)
	}
}

// The GCS calls of a TLS cluster present the head's certificate and verify with its CA.
func TestTLSClusterGCSCallsPresentTheHeadCertificate(t *testing.T) {
	rc := cluster("c").group("g", 1).with(func(rc *rayv1.RayCluster) {
		rc.Spec.TLSOptions = &rayv1.TLSOptions{Enabled: ptr.To(true)}
	}).obj()
	e := tlsEnv(t, rc, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ray-head-secret-c"},
		Data: map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k"), "ca.crt": []byte("ca")}})
	s := newState(rc, rc, children{})
	files, err := e.r.readTLSFiles(context.Background(), s)
	if err != nil || files == nil || string(files.Cert) != "c" || string(files.Key) != "k" || string(files.CA) != "ca" {
		t.Fatalf("TLS files %+v, %v", files, err)
	}
	rc.Name = "other"
	if _, err := e.r.readTLSFiles(context.Background(), newState(rc, rc, children{})); err == nil {
		t.Error("a missing head Secret gave no error")
	}
}

// A certificate within a day of its end is reported with KubeRay's warning (Ray keeps the certificate it
// loaded, so its pods need a restart after the renewal); one further off is not.
func TestTLSCertificateExpiringSoonIsReported(t *testing.T) {
	rc := cluster("c").group("g", 1).with(func(rc *rayv1.RayCluster) {
		rc.Spec.TLSOptions = &rayv1.TLSOptions{Enabled: ptr.To(true)}
	}).obj()
	e := tlsEnv(t, rc)
	e.mustReconcile(rc)
	e.issue("ray-head-cert-c")
	e.issue("ray-worker-cert-c")
	e.converge(rc)
	e.takeEvents()
	for name, left := range map[string]time.Duration{"ray-head-cert-c": 5 * time.Hour, "ray-worker-cert-c": 30 * 24 * time.Hour} {
		cert := e.certificate(name)
		_ = unstructured.SetNestedField(cert.Object, testNow.Add(left).UTC().Format(time.RFC3339), "status", "notAfter")
		if err := e.api.Update(context.Background(), cert); err != nil {
			t.Fatal(err)
		}
	}
	e.mustReconcile(rc)
	var warned []string
	for _, ev := range e.takeEvents() {
		if strings.Contains(ev, EventMTLSCertificateExpiringSoon) {
			warned = append(warned, ev)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "ray-head-cert-c expires in 5.0 hours") {
		t.Errorf("expiry warnings %q, want one for the head's certificate", warned)
	}
}

// What kray remembers of a cluster's certificate Secrets goes with the cluster, and only that cluster's.
func TestTLSSecretsForgottenWithTheirCluster(t *testing.T) {
	r := &Reconciler{}
	for _, name := range []string{"ray-head-secret-c", "ray-worker-secret-c", "c-ca-secret-01234567", "ray-head-secret-d", "d-ca-secret-89abcdef"} {
		r.ownedSecrets.Store(types.NamespacedName{Namespace: "ns", Name: name}, types.UID("u"))
	}
	r.ownedSecrets.Store(types.NamespacedName{Namespace: "other", Name: "ray-head-secret-c"}, types.UID("u"))
	r.forgetCertificateSecrets(types.NamespacedName{Namespace: "ns", Name: "c"})
	var left []string
	r.ownedSecrets.Range(func(k, _ any) bool {
		left = append(left, k.(types.NamespacedName).String())
		return true
	})
	slices.Sort(left)
	if want := []string{"ns/d-ca-secret-89abcdef", "ns/ray-head-secret-d", "other/ray-head-secret-c"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}
