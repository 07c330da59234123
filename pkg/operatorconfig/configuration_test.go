package operatorconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// What KubeRay v1.7's chart renders into config.yaml with configuration.enabled and its other values at
// their defaults, and a file with every pod default.
func TestParse(t *testing.T) {
	defaults := Configuration{TypeMeta: metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind}, MetricsAddr: ":8080", ProbeAddr: ":8082",
		EnableLeaderElection: ptr.To(true), ReconcileConcurrency: 1, QPS: ptr.To(100.0), Burst: ptr.To(200)}
	for _, tt := range []struct {
		name, file string
		want       func(*Configuration)
	}{
		{"only apiVersion and kind", "apiVersion: config.ray.io/v1alpha1\nkind: Configuration\n", func(*Configuration) {}},
		{"KubeRay's chart", `apiVersion: config.ray.io/v1alpha1
kind: Configuration
enableLeaderElection: true
enableMetrics: true
reconcileConcurrency: 1
qps: 100
burst: 200
logStdoutEncoder: "json"
logFileEncoder: "json"
`, func(c *Configuration) { c.EnableMetrics, c.LogStdoutEncoder, c.LogFileEncoder = true, "json", "json" }},
		{"pod defaults and settings", `apiVersion: config.ray.io/v1alpha1
kind: Configuration
metricsAddr: 127.0.0.1:9090
enableLeaderElection: false
watchNamespace: a,b
reconcileConcurrency: 4
qps: 150.5
burst: 300
deleteRayJobAfterJobFinishes: true
headSidecarContainers:
- name: fluentbit
  image: fluent/fluent-bit:1.9.6
workerSidecarContainers:
- name: fluentbit
  image: fluent/fluent-bit:1.9.6
defaultContainerEnvs:
- name: PLATFORM
  value: gpu
defaultPodLabels:
  cost-center: ml
defaultPodAnnotations:
  scrape: "true"
`, func(c *Configuration) {
			c.MetricsAddr, c.EnableLeaderElection, c.WatchNamespace, c.ReconcileConcurrency = "127.0.0.1:9090", ptr.To(false), "a,b", 4
			c.QPS, c.Burst, c.DeleteRayJobAfterJobFinishes = ptr.To(150.5), ptr.To(300), true
			sidecar := []corev1.Container{{Name: "fluentbit", Image: "fluent/fluent-bit:1.9.6"}}
			c.HeadSidecarContainers, c.WorkerSidecarContainers = sidecar, sidecar
			c.DefaultContainerEnvs = []corev1.EnvVar{{Name: "PLATFORM", Value: "gpu"}}
			c.DefaultPodLabels, c.DefaultPodAnnotations = map[string]string{"cost-center": "ml"}, map[string]string{"scrape": "true"}
		}},
		{"an empty file: every default", "", func(c *Configuration) { c.TypeMeta = metav1.TypeMeta{} }},
		{"no apiVersion or kind, as KubeRay allows", "qps: 10\n", func(c *Configuration) { c.TypeMeta = metav1.TypeMeta{}; c.QPS = ptr.To(10.0) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			want := defaults // the cases replace the pointers, never write through them
			tt.want(&want)
			if diff := cmp.Diff(&want, got, cmpopts.IgnoreUnexported(Configuration{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetsTellsTheFieldsTheFileGives(t *testing.T) {
	c, err := Parse([]byte("apiVersion: config.ray.io/v1alpha1\nkind: Configuration\nqps: 10\nenableLeaderElection: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]bool{"qps": true, "enableLeaderElection": true, "burst": false, "metricsAddr": false} {
		if c.Sets(field) != want {
			t.Errorf("Sets(%q) = %t, want %t", field, !want, want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tt := range []struct{ name, file, want string }{
		{"unknown field", "apiVersion: config.ray.io/v1alpha1\nkind: Configuration\nreconcileConcurency: 4\n", `unknown field "reconcileConcurency"`},
		{"wrong case", "MetricsAddr: :9090\n", `unknown field "MetricsAddr"`},
		{"unknown field in a sidecar", "headSidecarContainers:\n- name: a\n  image: b\n  imagePullPolice: Always\n", `unknown field "headSidecarContainers[0].imagePullPolice"`},
		{"wrong type", "burst: 300.5\n", "cannot unmarshal number 300.5"},
		{"another apiVersion", "apiVersion: config.ray.io/v1\nkind: Configuration\n", `apiVersion "config.ray.io/v1", want config.ray.io/v1alpha1`},
		{"another kind", "apiVersion: config.ray.io/v1alpha1\nkind: Config\n", `kind "Config", want Configuration`},
		{"a sidecar without an image", "workerSidecarContainers:\n- name: a\n", "sidecar container 0 has no name or no image"},
		{"not YAML", "qps: [\n", "yaml"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse([]byte(tt.file)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("qpss: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "Configuration file "+path+": ") || !strings.Contains(err.Error(), `"qpss"`) {
		t.Errorf("error %v, want the path and the field", err)
	}
	if _, err := Load(path + ".missing"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}
