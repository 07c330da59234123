package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/kray-project/kray/pkg/builder"
)

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// KubeRay's chart in configuration mode passes --config and --feature-gates only: the file's fields and
// KubeRay's defaults for the rest become the operator's settings, metrics on plain HTTP at :8080 as
// KubeRay's chart probes them, and the pod defaults reach the builders.
func TestConfigurationFileSetsTheOperator(t *testing.T) {
	path := writeConfig(t, `apiVersion: config.ray.io/v1alpha1
kind: Configuration
enableLeaderElection: true
enableMetrics: true
reconcileConcurrency: 3
qps: 100
burst: 200
watchNamespace: "team-a,team-b"
logStdoutEncoder: "json"
logFileEncoder: "json"
deleteRayJobAfterJobFinishes: true
workerSidecarContainers:
- name: fluentbit
  image: fluent/fluent-bit:1.9.6
defaultContainerEnvs:
- name: PLATFORM
  value: gpu
defaultPodLabels:
  cost-center: ml
`)
	o, err := parse(t, nil, "--config", path, "--feature-gates=RayClusterStatusConditions=true,RayJobDeletionPolicy=true,RayMultiHostIndexing=true,RayServiceIncrementalUpgrade=true,RayCronJob=false,RayClusterMTLS=false,RayClusterNetworkPolicy=false,RayClusterHistoryServer=false")
	if err != nil {
		t.Fatal(err)
	}
	got := []any{o.metricsAddr, o.secureMetrics, o.probeAddr, o.leaderElect, o.concurrency, o.jobWorkers, o.serviceWorker, o.namespaces, o.qps, o.burst, o.deleteJobs}
	want := []any{":8080", false, ":8082", true, 3, 3, 3, "team-a,team-b", 100.0, 200, true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
	wantDefaults := builder.PodDefaults{
		WorkerSidecars: []corev1.Container{{Name: "fluentbit", Image: "fluent/fluent-bit:1.9.6"}},
		Env:            []corev1.EnvVar{{Name: "PLATFORM", Value: "gpu"}},
		Labels:         map[string]string{"cost-center": "ml"},
	}
	if diff := cmp.Diff(wantDefaults, o.podDefaults); diff != "" {
		t.Errorf("pod defaults (-want +got):\n%s", diff)
	}
	// KubeRay v1.7 documents deleteRayJobAfterJobFinishes but ignores it; kray honours it, and says so.
	if len(o.warnings) != 1 || !strings.Contains(o.warnings[0], "deleteRayJobAfterJobFinishes is true") || !strings.Contains(o.warnings[0], "KubeRay v1.7 ignores this field") {
		t.Errorf("warnings %q", o.warnings)
	}
}

func TestConfigurationFileRefusals(t *testing.T) {
	for _, tt := range []struct {
		name, file string
		args       []string
		want       string
	}{
		{"a flag the file also sets", "qps: 5\nenableLeaderElection: true\n", []string{"--qps=10", "--leader-elect", "--kube-api-burst=7"},
			"--leader-elect (the file's enableLeaderElection), --qps (the file's qps) set what the Configuration file sets"},
		{"an unknown field", "reconcileConcurency: 2\n", nil, `unknown field "reconcileConcurency"`},
		{"a log file", "logFile: /var/log/kuberay.log\n", nil, "logFile: kray logs to stderr only"},
		{"an unknown batch scheduler", "batchScheduler: default\n", nil, "scheduler is not supported, name=default"},
		{"a bad encoder", "logStdoutEncoder: xml\n", nil, "logStdoutEncoder"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.file)
			_, err := parse(t, nil, append([]string{"--config=" + path}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %v, want one naming %s and saying %q", err, path, tt.want)
			}
		})
	}
}

// A field the file leaves out keeps its flag (kray's chart passes its settings as flags and the pod defaults
// in the file), else takes KubeRay's default.
func TestConfigurationFileLeavesOutFieldsToFlags(t *testing.T) {
	path := writeConfig(t, "defaultPodLabels: {cost-center: ml}\n")
	o, err := parse(t, nil, "--config", path, "--metrics-bind-address=:8443", "--metrics-secure=true", "--leader-elect=false", "--max-concurrent-reconciles=4", "--kube-api-qps=50")
	if err != nil {
		t.Fatal(err)
	}
	got := []any{o.metricsAddr, o.secureMetrics, o.probeAddr, o.leaderElect, o.concurrency, o.jobWorkers, o.qps, o.burst, o.podDefaults.Labels["cost-center"]}
	want := []any{":8443", true, ":8082", false, 4, 4, 50.0, 200, "ml"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
}

// The worker flags of kray's own still choose their controller's workers beside a Configuration file.
func TestConfigurationFileKeepsKraysOwnFlags(t *testing.T) {
	path := writeConfig(t, "reconcileConcurrency: 2\nenableMetrics: false\n")
	o, err := parse(t, nil, "--config", path, "--rayjob-max-concurrent-reconciles=6")
	if err != nil {
		t.Fatal(err)
	}
	if o.concurrency != 2 || o.serviceWorker != 2 || o.jobWorkers != 6 {
		t.Errorf("workers %d/%d/%d, want 2/6/2", o.concurrency, o.jobWorkers, o.serviceWorker)
	}
	if len(o.warnings) != 1 || !strings.Contains(o.warnings[0], "enableMetrics is false") {
		t.Errorf("warnings %q", o.warnings)
	}
}

// useKubernetesProxy sets what --use-kubernetes-proxy sets.
func TestConfigurationFileKubernetesProxy(t *testing.T) {
	o, err := parse(t, nil, "--config", writeConfig(t, "useKubernetesProxy: true\n"))
	if err != nil || !o.kubernetesProxy {
		t.Errorf("useKubernetesProxy: %t, %v", o.kubernetesProxy, err)
	}
}
