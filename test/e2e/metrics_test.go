package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// The metrics endpoint requires authentication and authorization by default: no token is 401, a token
// without the kray-metrics-reader role is 403, and a ServiceAccount bound to it reads the metrics.
func TestMetricsRequireAuthentication(t *testing.T) {
	if !localCluster() {
		t.Skip("runs its own operator replica with hack/operator.sh")
	}
	g := NewWithT(t)
	ns := namespace(t)
	// A second replica that watches only this empty namespace, so it never acts beside the main operator.
	replica := []string{"KRAY_OPERATOR_INSTANCE=metrics", "KRAY_OPERATOR_PROBE_PORT=28093",
		"KRAY_OPERATOR_ARGS=--metrics-bind-address=127.0.0.1:28443 --watch-namespaces=" + ns}
	hackEnv(t, replica, "operator.sh", "start")
	t.Cleanup(func() { hackEnv(t, replica, "operator.sh", "stop") })

	ctx := context.Background()
	for _, name := range []string{"scraper", "stranger"} {
		g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})).To(Succeed())
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kray-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: ns}},
	}
	g.Expect(k8s.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), binding) })

	token := func(sa string) string {
		tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return tr.Status.Token
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the operator serves a self-signed certificate
	}}
	scrape := func(g Gomega, bearer string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, "https://127.0.0.1:28443/metrics", nil)
		g.Expect(err).NotTo(HaveOccurred())
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// The metrics server may start listening a moment after /readyz answers.
	g.Eventually(func(g Gomega) {
		code, _ := scrape(g, "")
		g.Expect(code).To(Equal(http.StatusUnauthorized))
	}, readyTimeout, poll).Should(Succeed())
	code, _ := scrape(g, token("stranger"))
	g.Expect(code).To(Equal(http.StatusForbidden))
	g.Eventually(func(g Gomega) {
		code, body := scrape(g, token("scraper"))
		g.Expect(code).To(Equal(http.StatusOK))
		g.Expect(strings.Contains(body, "controller_runtime_reconcile_total")).To(BeTrue())
	}, readyTimeout, poll).Should(Succeed())
}

// KubeRay's --metrics-addr serves the metrics over plain HTTP, as KubeRay's chart probes them, and KubeRay's
// RayCluster series are there for a provisioned RayCluster (info with owner_kind, the provisioned condition).
func TestKubeRayMetricsOverPlainHTTP(t *testing.T) {
	if !localCluster() {
		t.Skip("runs its own operator replica with hack/operator.sh")
	}
	g := NewWithT(t)
	ns := namespace(t)
	replica := []string{"KRAY_OPERATOR_INSTANCE=kuberay-metrics", "KRAY_OPERATOR_PROBE_PORT=28094",
		"KRAY_OPERATOR_ARGS=--metrics-addr=127.0.0.1:28080 --enable-metrics=true --watch-namespace=" + ns}
	hackEnv(t, replica, "operator.sh", "start")
	t.Cleanup(func() { hackEnv(t, replica, "operator.sh", "stop") })
	rc := create(t, loadSample(t, "ray-cluster.sample.yaml", ns))
	g.Eventually(func(g Gomega) {
		g.Expect(condition(get(g, rc), string(rayv1.RayClusterProvisioned))).NotTo(BeNil())
		g.Expect(condition(get(g, rc), string(rayv1.RayClusterProvisioned)).Status).To(Equal(metav1.ConditionTrue))
	}, readyTimeout, poll).Should(Succeed())
	uid := string(get(g, rc).UID)
	client := &http.Client{Timeout: 5 * time.Second}
	g.Eventually(func(g Gomega) {
		resp, err := client.Get("http://127.0.0.1:28080/metrics")
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		g.Expect(string(body)).To(ContainSubstring(fmt.Sprintf(`kuberay_cluster_info{name=%q,namespace=%q,owner_kind="None",uid=%q} 1`, rc.Name, ns, uid)))
		g.Expect(string(body)).To(ContainSubstring(fmt.Sprintf(`kuberay_cluster_condition_provisioned{condition="true",name=%q,namespace=%q,uid=%q} 1`, rc.Name, ns, uid)))
	}, readyTimeout, poll).Should(Succeed())
}
