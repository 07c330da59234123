package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/featuregate"
	"sigs.k8s.io/yaml"

	"github.com/kray-project/kray/internal/kuberayref"
)

// kubeRayValues is the part of KubeRay v1.7's operator chart values that its deployment template turns into
// the operator's arguments when configuration.enabled is false.
type kubeRayValues struct {
	Logging struct {
		StdoutEncoder string `json:"stdoutEncoder"`
		FileEncoder   string `json:"fileEncoder"`
	} `json:"logging"`
	FeatureGates []struct {
		Name    string `json:"name"`
		Enabled bool   `json:"enabled"`
	} `json:"featureGates"`
	Metrics struct {
		Enabled bool `json:"enabled"`
	} `json:"metrics"`
	LeaderElectionEnabled bool                         `json:"leaderElectionEnabled"`
	ReconcileConcurrency  int                          `json:"reconcileConcurrency"`
	KubeClient            struct{ QPS, Burst float64 } `json:"kubeClient"`
	WatchNamespace        []string                     `json:"watchNamespace"`
}

// kubeRayChartArgs renders the arguments of KubeRay's deployment template (flag mode) from values.
func kubeRayChartArgs(v kubeRayValues) []string {
	args := []string{}
	if len(v.WatchNamespace) > 0 {
		args = append(args, "--watch-namespace", strings.Join(v.WatchNamespace, ","))
	}
	args = append(args, "--log-stdout-encoder", v.Logging.StdoutEncoder, "--log-file-encoder", v.Logging.FileEncoder,
		fmt.Sprintf("--enable-leader-election=%t", v.LeaderElectionEnabled), fmt.Sprintf("--enable-metrics=%t", v.Metrics.Enabled),
		fmt.Sprintf("--reconcile-concurrency=%d", v.ReconcileConcurrency), fmt.Sprintf("--qps=%v", v.KubeClient.QPS), fmt.Sprintf("--burst=%v", v.KubeClient.Burst))
	var gates []string
	for _, g := range v.FeatureGates {
		gates = append(gates, fmt.Sprintf("%s=%t", g.Name, g.Enabled))
	}
	return append(args, "--feature-gates="+strings.Join(gates, ","))
}

// kubeRayChartEnv is every environment variable that KubeRay v1.7's values file offers (commented out in its
// env list), with the value it shows.
func kubeRayChartEnv(t *testing.T, values []byte) map[string]string {
	t.Helper()
	env := map[string]string{}
	name := ""
	sc := bufio.NewScanner(strings.NewReader(string(values)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if n, ok := strings.CutPrefix(line, "# - name: "); ok {
			name = n
		} else if v, ok := strings.CutPrefix(line, "#   value: "); ok && name != "" {
			env[name] = strings.Trim(v, `"`)
			name = ""
		}
	}
	if len(env) < 15 {
		t.Fatalf("found %d env vars in KubeRay's values; its layout may have changed", len(env))
	}
	return env
}

// KubeRay v1.7's operator chart, as its values file ships, starts kray unchanged: the arguments its
// deployment template renders, with every environment variable its values offer set to the value it shows,
// and the settings act as in KubeRay.
func TestKubeRayChartValuesStartKray(t *testing.T) {
	path, err := kuberayref.Path(kuberayref.HelmValues)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v kubeRayValues
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	args := kubeRayChartArgs(v)
	for _, env := range []map[string]string{nil, kubeRayChartEnv(t, data)} {
		o, err := parse(t, env, args...)
		if err != nil {
			t.Fatalf("KubeRay's chart arguments %q (env %v): %v", args, env, err)
		}
		if !o.leaderElect || o.concurrency != 1 || o.qps != 100 || o.burst != 200 {
			t.Errorf("leader election %t, concurrency %d, qps %v, burst %d; want KubeRay's values", o.leaderElect, o.concurrency, o.qps, o.burst)
		}
		for _, g := range v.FeatureGates {
			if g.Name == "RayMultiHostIndexing" {
				continue // kray's gate default differs, the chart sets it on, and kray honours it
			}
			if o.gates.Enabled(featuregate.Feature(g.Name)) != g.Enabled {
				t.Errorf("gate %s = %t, the chart says %t", g.Name, !g.Enabled, g.Enabled)
			}
		}
		if env != nil && (len(o.warnings) != 2 || !strings.Contains(o.warnings[0], envDeterministicHeadPodName) || !strings.Contains(o.warnings[1], envIngressOnOpenShift)) {
			t.Errorf("warnings %q, want the two KubeRay settings kray does not act on", o.warnings)
		}
		if env != nil && (o.statusCheck != 300*time.Second || o.clusterDomain != "cluster.local" || !o.zeroDowntime || !o.probes || !o.loginShell) {
			t.Errorf("env not read as KubeRay reads it: %+v", o)
		}
	}
}
