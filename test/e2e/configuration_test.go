package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

// envOf is the value of the env var name in c, "" when absent.
func envOf(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// A platform's KubeRay operator settings start kray unchanged and take effect: a Configuration file (--config)
// whose watchNamespace, worker and head sidecars, default labels and default env reach the pods, and
// KubeRay's CLUSTER_DOMAIN in the operator's environment in the head Service address the workers use; a
// namespace not watched is left alone.
func TestKubeRayConfigurationFile(t *testing.T) {
	if !localCluster() {
		t.Skip("restarts the operator with a Configuration file through hack/operator.sh")
	}
	g := NewWithT(t)
	watched, other := namespace(t), namespace(t)
	probePort := os.Getenv("KRAY_OPERATOR_PROBE_PORT")
	if probePort == "" {
		probePort = "28081"
	}
	config := filepath.Join(t.TempDir(), "config.yaml")
	g.Expect(os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: config.ray.io/v1alpha1
kind: Configuration
metricsAddr: "0"
probeAddr: 127.0.0.1:%s
enableLeaderElection: false
enableMetrics: true
reconcileConcurrency: 2
qps: 100
burst: 200
watchNamespace: %q
headSidecarContainers:
- name: log-shipper
  image: fluent/fluent-bit:1.9.6
workerSidecarContainers:
- name: log-shipper
  image: fluent/fluent-bit:1.9.6
defaultContainerEnvs:
- name: PLATFORM
  value: gpu
defaultPodLabels:
  cost-center: ml
`, probePort, watched)), 0o600)).To(Succeed())

	hack(t, "operator.sh", "stop")
	t.Cleanup(func() { hack(t, "operator.sh", "stop"); hack(t, "operator.sh", "start") })
	hackEnv(t, []string{"KRAY_OPERATOR_CONFIG=" + config, "CLUSTER_DOMAIN=corp.example"}, "operator.sh", "start")

	ignored := create(t, loadSample(t, "ray-cluster.sample.yaml", other))
	rc := create(t, loadSample(t, "ray-cluster.sample.yaml", watched))
	waitReady(t, rc, 2)
	for _, p := range clusterPods(g, rc) {
		g.Expect(p.Labels).To(HaveKeyWithValue("cost-center", "ml"), "pod %s", p.Name)
		names := []string{}
		for _, c := range p.Spec.Containers {
			names = append(names, c.Name)
		}
		g.Expect(names[len(names)-1]).To(Equal("log-shipper"), "pod %s: the sidecar comes last", p.Name)
		ray := p.Spec.Containers[constants.RayContainerIndex]
		g.Expect(envOf(ray, "PLATFORM")).To(Equal("gpu"), "pod %s", p.Name)
		if p.Labels[constants.LabelNodeType] == constants.NodeTypeWorker {
			g.Expect(envOf(ray, "FQ_RAY_IP")).To(HaveSuffix(".svc.corp.example"), "pod %s: the head's address in the cluster domain", p.Name)
		}
	}
	// The namespace the file does not watch: no workload, no status.
	g.Consistently(func(g Gomega) {
		var sets kruisev1alpha1.CloneSetList
		g.Expect(k8s.List(context.Background(), &sets, client.InNamespace(other))).To(Succeed())
		g.Expect(sets.Items).To(BeEmpty())
		cur := &rayv1.RayCluster{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(ignored), cur)).To(Succeed())
		g.Expect(cur.Status.State).To(BeEmpty())
	}, 2*time.Second, poll).Should(Succeed())
}
