package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/kuberayref"
)

// scrapeTargetLabels are the labels Prometheus adds from the scrape target (the operator pod), not the
// operator: the dashboard's selectors on them need no series label.
var scrapeTargetLabels = map[string]bool{"namespace": true, "pod": true}

// kubeStateMetrics are the dashboard's series that kube-state-metrics exports, not the operator.
const kubeStateMetrics = "kube_"

// dashboardSeries returns, from KubeRay's Grafana dashboard, every series name its queries read with the
// label names their selectors use.
func dashboardSeries(t *testing.T) map[string][]string {
	t.Helper()
	path, err := kuberayref.Path(kuberayref.GrafanaBoard)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var board any
	if err := json.Unmarshal(data, &board); err != nil {
		t.Fatal(err)
	}
	var queries []string
	var walk func(any)
	walk = func(x any) {
		switch v := x.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && (k == "expr" || k == "query" || k == "definition") {
					queries = append(queries, s)
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(board)
	series := map[string][]string{}
	name := regexp.MustCompile(`\b((?:kuberay|controller_runtime|workqueue|kube)_[a-z_]+)(\{[^}]*\})?`)
	label := regexp.MustCompile(`([a-z_]+)\s*=~?`)
	for _, q := range queries {
		for _, m := range name.FindAllStringSubmatch(q, -1) {
			labels := series[m[1]]
			for _, l := range label.FindAllStringSubmatch(m[2], -1) {
				if !scrapeTargetLabels[l[1]] || strings.HasPrefix(m[1], "kuberay_") {
					labels = append(labels, l[1])
				}
			}
			series[m[1]] = labels
		}
	}
	return series
}

// KubeRay's own Grafana dashboard finds every series it reads in kray's metrics, with the labels its
// selectors use, once a RayCluster, a RayJob and a RayService ran: its panels are not empty under kray.
// kube_* series come from kube-state-metrics, not the operator.
func TestKubeRayGrafanaDashboardFindsItsSeries(t *testing.T) {
	needFakeDashboard(t)
	if !localCluster() {
		t.Skip("restarts the operator with KubeRay's metrics address through hack/operator.sh")
	}
	g := NewWithT(t)
	want := dashboardSeries(t)
	g.Expect(want).To(HaveKey("kuberay_job_deployment_status"), "the dashboard's layout may have changed")

	hack(t, "operator.sh", "stop")
	t.Cleanup(func() { hack(t, "operator.sh", "stop"); hack(t, "operator.sh", "start") })
	hackEnv(t, []string{"KRAY_OPERATOR_ARGS=" + os.Getenv("KRAY_OPERATOR_ARGS") + " --metrics-addr=127.0.0.1:28080"}, "operator.sh", "start")
	ns := namespace(t)
	rc := create(t, loadSample(t, "ray-cluster.sample.yaml", ns))
	job := createJob(t, rayJob(t, ns, "metrics-job", rayv1.HTTPMode))
	svc := createService(t, kubeRayServiceSample(t, "ray-service.sample.yaml", ns))
	waitReady(t, rc, 2)
	waitJobState(t, job, rayv1.JobDeploymentStatusComplete)
	waitServing(t, svc)

	client := &http.Client{Timeout: 5 * time.Second}
	g.Eventually(func(g Gomega) {
		resp, err := client.Get("http://127.0.0.1:28080/metrics")
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		var missing []string
		for name, labels := range want {
			if strings.HasPrefix(name, kubeStateMetrics) {
				continue
			}
			fam := families[strings.TrimSuffix(name, "_bucket")]
			if fam == nil || len(fam.Metric) == 0 {
				missing = append(missing, name)
				continue
			}
			for _, l := range labels {
				if !hasLabel(fam.Metric, l) {
					missing = append(missing, name+" label "+l)
				}
			}
		}
		sort.Strings(missing)
		g.Expect(missing).To(BeEmpty())
	}, readyTimeout, poll).Should(Succeed())
}

// hasLabel reports whether a series of ms carries the label name.
func hasLabel(ms []*dto.Metric, name string) bool {
	for _, m := range ms {
		for _, l := range m.Label {
			if l.GetName() == name {
				return true
			}
		}
	}
	return false
}
