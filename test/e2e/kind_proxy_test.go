package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// proxyRequests is how many requests the API server has served on the proxy subresource of resource
// ("services" or "pods"), from its own metrics.
func proxyRequests(t *testing.T, resource string) int {
	t.Helper()
	total := 0
	for _, line := range strings.Split(kubectl(t, "get", "--raw", "/metrics"), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="`+resource+`"`) ||
			!strings.Contains(line, `subresource="proxy"`) {
			continue
		}
		f := strings.Fields(line)
		if n, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			total += int(n)
		}
	}
	return total
}

// useKubernetesProxy restarts the operator with --use-kubernetes-proxy and the rights the chart grants with
// it (useKubernetesProxy: true), and puts the operator back as it was once the test ends.
func useKubernetesProxy(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "kray-e2e-kubernetes-proxy"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services/proxy"}, Verbs: []string{"create", "delete", "get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"pods/proxy"}, Verbs: []string{"get"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: kindOperatorNS, Name: kindDeployment}}}
	for _, o := range []client.Object{role, binding} {
		g.Expect(k8s.Create(ctx, o)).To(Succeed())
	}
	rollout := func(patch string) {
		kubectl(t, "-n", kindOperatorNS, "patch", "deployment", kindDeployment, "--type=json", "-p", patch)
		kubectl(t, "-n", kindOperatorNS, "rollout", "status", "deployment/"+kindDeployment, "--timeout=180s")
	}
	rollout(`[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--use-kubernetes-proxy"}]`)
	t.Cleanup(func() {
		rollout(`[{"op":"remove","path":"/spec/template/spec/containers/0/args/` + strconv.Itoa(operatorArgs(t)-1) + `"}]`)
		for _, o := range []client.Object{binding, role} {
			_ = k8s.Delete(ctx, o)
		}
	})
}

// operatorArgs is how many arguments the operator's container has.
func operatorArgs(t *testing.T) int {
	out := kubectl(t, "-n", kindOperatorNS, "get", "deployment", kindDeployment, "-o", "jsonpath={.spec.template.spec.containers[0].args}")
	return strings.Count(out, `","`) + 1
}

// KubeRay's --use-kubernetes-proxy on real kubelets: with the operator restarted with it, a RayJob that the
// operator submits itself (HTTPMode) runs and succeeds, and a RayService becomes ready, every dashboard call
// going through the API server's services/proxy subresource and the Serve health check through pods/proxy,
// as the API server's own request counts show.
func TestKindDashboardAndServeThroughTheAPIServerProxy(t *testing.T) {
	requireKind(t)
	useKubernetesProxy(t)
	g := NewWithT(t)
	ns := kindNamespace(t)
	services, pods := proxyRequests(t, "services"), proxyRequests(t, "pods")

	rc := kindRayCluster(ns, "", 1)
	job := &rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "proxied"},
		Spec: rayv1.RayJobSpec{SubmissionMode: rayv1.HTTPMode, Entrypoint: "echo through-the-api-server", RayClusterSpec: &rc.Spec}}
	g.Expect(k8s.Create(context.Background(), job)).To(Succeed())
	svc := kubeRayServiceSample(t, "ray-service.sample.yaml", ns)
	fitKindSpec(&svc.Spec.RayClusterSpec)
	createService(t, svc)

	g.Eventually(func(g Gomega) {
		cur := &rayv1.RayJob{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(job), cur)).To(Succeed())
		g.Expect(cur.Status.JobStatus).To(Equal(rayv1.JobStatusSucceeded))
	}, kindTimeout, time.Second).Should(Succeed())
	waitKindServiceReady(t, svc)
	g.Expect(proxyRequests(t, "services")).To(BeNumerically(">", services), "dashboard calls through services/proxy")
	g.Expect(proxyRequests(t, "pods")).To(BeNumerically(">", pods), "Serve health checks through pods/proxy")
	expectOperatorNeverForbidden(t)
}
