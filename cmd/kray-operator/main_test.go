package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// parse runs parseFlags on args with env as the whole environment.
func parse(t *testing.T, env map[string]string, args ...string) (options, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o, _, err := parseFlags(fs, args, func(k string) string { return env[k] })
	return o, err
}

// KubeRay's RayJob environment variables set the defaults of their flags, read as KubeRay reads them.
func TestRayJobSettingsFromKubeRaysEnvironment(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		wantDelete bool
		wantGrace  time.Duration
		wantErr    string
	}{
		{name: "defaults", wantGrace: 5 * time.Minute},
		{name: "KubeRay's env", env: map[string]string{envDeleteRayJobAfterJobFinishes: "TRUE", envTransitionGracePeriodSeconds: "30"},
			wantDelete: true, wantGrace: 30 * time.Second},
		{name: "anything but true is false, as in KubeRay", env: map[string]string{envDeleteRayJobAfterJobFinishes: "yes"}, wantGrace: 5 * time.Minute},
		{name: "flags override the env", env: map[string]string{envDeleteRayJobAfterJobFinishes: "true", envTransitionGracePeriodSeconds: "30"},
			args: []string{"--delete-rayjob-cr-after-job-finishes=false", "--rayjob-deployment-status-transition-grace-period=2m"}, wantGrace: 2 * time.Minute},
		{name: "a grace period that is not seconds", env: map[string]string{envTransitionGracePeriodSeconds: "5m"},
			wantErr: "RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS must be a positive whole number of seconds, got \"5m\""},
		{name: "no RayJob workers", args: []string{"--rayjob-max-concurrent-reconciles=0"}, wantErr: "--rayjob-max-concurrent-reconciles must be at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(t, tt.env, tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.deleteJobs != tt.wantDelete || o.jobGrace != tt.wantGrace {
				t.Errorf("delete %t grace %s, want %t %s", o.deleteJobs, o.jobGrace, tt.wantDelete, tt.wantGrace)
			}
		})
	}
}

// KubeRay v1.7's RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS, read as KubeRay reads it: a value that is not a positive
// number of seconds is the default, said in a warning; the flag overrides it.
func TestRayJobStatusCheckTimeoutFromKubeRaysEnvironment(t *testing.T) {
	for _, tt := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    time.Duration
		warning bool
	}{
		{name: "default", want: 5 * time.Minute},
		{name: "KubeRay's env", env: map[string]string{envStatusCheckTimeoutSeconds: "60"}, want: time.Minute},
		{name: "zero is the default, as in KubeRay", env: map[string]string{envStatusCheckTimeoutSeconds: "0"}, want: 5 * time.Minute, warning: true},
		{name: "not a number", env: map[string]string{envStatusCheckTimeoutSeconds: "1m"}, want: 5 * time.Minute, warning: true},
		{name: "the flag wins", env: map[string]string{envStatusCheckTimeoutSeconds: "60"}, args: []string{"--rayjob-status-check-timeout=90s"}, want: 90 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(t, tt.env, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			warned := slices.ContainsFunc(o.warnings, func(w string) bool { return strings.Contains(w, envStatusCheckTimeoutSeconds) })
			if o.statusCheck != tt.want || warned != tt.warning {
				t.Errorf("timeout %s (warned %t), want %s (warned %t)", o.statusCheck, warned, tt.want, tt.warning)
			}
		})
	}
}

func TestRayJobWorkersAreTheirOwn(t *testing.T) {
	o, err := parse(t, nil, "--max-concurrent-reconciles=8", "--rayjob-max-concurrent-reconciles=2")
	if err != nil {
		t.Fatal(err)
	}
	if o.concurrency != 8 || o.jobWorkers != 2 {
		t.Errorf("RayCluster workers %d, RayJob workers %d; want 8 and 2", o.concurrency, o.jobWorkers)
	}
}

// Who the operator's pods are, for the operator rule of the head NetworkPolicy: labels need a namespace; a
// namespace without labels is taken (the rule lets in every pod of it) with a warning that says so.
func TestOperatorPeerFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		err     string
		warning string
		peer    bool
	}{
		{args: nil},
		{args: []string{"--operator-namespace=ops", "--operator-pod-labels=app=kray"}, peer: true},
		{args: []string{"--operator-namespace=ops"}, warning: "lets every pod of namespace ops in", peer: true},
		{args: []string{"--operator-pod-labels=app=kray"}, err: "--operator-pod-labels needs --operator-namespace"},
	} {
		o, err := parse(t, nil, tc.args...)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.args, err, tc.err)
			}
			continue
		case err != nil:
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		warned := slices.ContainsFunc(o.warnings, func(w string) bool { return tc.warning != "" && strings.Contains(w, tc.warning) })
		if warned != (tc.warning != "") || (tc.warning == "" && len(o.warnings) != 0) {
			t.Errorf("%q: warnings %q, want one saying %q", tc.args, o.warnings, tc.warning)
		}
		if (o.operatorPeer() != nil) != tc.peer {
			t.Errorf("%q: operator peer %v, want one: %t", tc.args, o.operatorPeer(), tc.peer)
		}
	}
}

func TestIngressAnnotationPrefixes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, nil},
		{[]string{"--ingress-annotation-prefixes=example.com/, cert-manager.io/"}, []string{"example.com/", "cert-manager.io/"}},
		{[]string{"--ingress-annotation-prefixes="}, []string{}},
	} {
		o, err := parse(t, nil, tc.args...)
		if err != nil || !cmp.Equal(tc.want, o.ingressPrefixes) {
			t.Errorf("%q: %#v, %v; want %#v", tc.args, o.ingressPrefixes, err, tc.want)
		}
	}
}

// The arguments KubeRay v1.7's chart renders with its default values (templates/deployment.yaml and
// _helpers.tpl's featureGates) start kray, each acting as its kray counterpart.
func TestKubeRayChartArgumentsStartKray(t *testing.T) {
	o, err := parse(t, nil,
		"--log-stdout-encoder", "json", "--log-file-encoder", "json", "--enable-leader-election=true", "--enable-metrics=true",
		"--reconcile-concurrency=1", "--qps=100", "--burst=200",
		"--feature-gates=RayClusterStatusConditions=true,RayJobDeletionPolicy=true,RayMultiHostIndexing=true,RayServiceIncrementalUpgrade=true,RayCronJob=false,RayClusterMTLS=false,RayClusterNetworkPolicy=false,RayClusterHistoryServer=false")
	if err != nil {
		t.Fatal(err)
	}
	if !o.leaderElect || o.concurrency != 1 || o.qps != 100 || o.burst != 200 {
		t.Errorf("leader election %t, concurrency %d, qps %v, burst %d; want true, 1, 100, 200", o.leaderElect, o.concurrency, o.qps, o.burst)
	}
	if !o.gates.Enabled("RayMultiHostIndexing") || !o.gates.Enabled("RayServiceIncrementalUpgrade") {
		t.Error("the chart's gates were not applied")
	}
	if len(o.warnings) != 0 {
		t.Errorf("warnings %q, want none for the chart's defaults", o.warnings)
	}
}

// KubeRay's other flag names: --metrics-addr serves plain HTTP, --watch-namespace is --watch-namespaces,
// kray's own flags win over KubeRay's, and what kray has no feature for stops it, naming the flag.
func TestKubeRayFlagNames(t *testing.T) {
	o, err := parse(t, nil, "--metrics-addr=:8080", "--watch-namespace=a,b", "--enable-metrics=false", "--forced-cluster-upgrade")
	if err != nil {
		t.Fatal(err)
	}
	if o.metricsAddr != ":8080" || o.secureMetrics || o.namespaces != "a,b" || len(o.warnings) != 2 {
		t.Errorf("metrics %s secure %t, namespaces %q, warnings %q", o.metricsAddr, o.secureMetrics, o.namespaces, o.warnings)
	}
	if o, err := parse(t, nil, "--metrics-bind-address=0", "--metrics-addr=:8080"); err != nil || o.metricsAddr != ":8080" || o.secureMetrics {
		t.Errorf("--metrics-addr beside --metrics-bind-address: %s secure %t, %v; want KubeRay's plain endpoint", o.metricsAddr, o.secureMetrics, err)
	}
	// Asking for authenticated metrics and KubeRay's plain endpoint at once is refused, not half done.
	if _, err := parse(t, nil, "--metrics-secure=true", "--metrics-addr=:8080"); err == nil || !strings.Contains(err.Error(), "--metrics-addr serves KubeRay's plain HTTP metrics and cannot be given with --metrics-secure=true") {
		t.Errorf("--metrics-addr with --metrics-secure=true: %v, want an error", err)
	}
	if o, err := parse(t, nil, "--metrics-secure=false", "--metrics-addr=:8080"); err != nil || o.secureMetrics || o.metricsAddr != ":8080" {
		t.Errorf("--metrics-addr with --metrics-secure=false: %s secure %t, %v", o.metricsAddr, o.secureMetrics, err)
	}
	if o, err := parse(t, nil, "--enable-leader-election=true", "--leader-elect=false"); err != nil || o.leaderElect {
		t.Errorf("--leader-elect=false after KubeRay's true: %t, %v; want kray's flag to win", o.leaderElect, err)
	}
	if o, err := parse(t, nil); err != nil || o.leaderElect || !o.secureMetrics || o.metricsAddr != ":8443" {
		t.Errorf("kray's defaults: leader election %t, secure %t, metrics %s, %v", o.leaderElect, o.secureMetrics, o.metricsAddr, err)
	}
	if o, err := parse(t, nil, "--use-kubernetes-proxy"); err != nil || !o.kubernetesProxy {
		t.Errorf("--use-kubernetes-proxy: %t, %v", o.kubernetesProxy, err)
	}
	for args, want := range map[string]string{
		"--config=/etc/kuberay/config.yaml":                                    "read the Configuration file: open /etc/kuberay/config.yaml: no such file or directory",
		"--use-kubernetes-proxy --ray-dashboard-address=http://127.0.0.1:8265": "--use-kubernetes-proxy sets where the dashboard and Serve proxy calls go",
		"--log-file-path=/tmp/kuberay.log":                                     "kray logs to stderr only",
		"--log-stdout-encoder=xml":                                             "--log-stdout-encoder",
	} {
		if _, err := parse(t, nil, strings.Fields(args)...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", args, err, want)
		}
	}
}

// KubeRay's operator environment variables set kray's flag defaults, read as KubeRay reads them; flags win.
func TestKubeRayEnvironment(t *testing.T) {
	o, err := parse(t, map[string]string{envClusterDomain: "corp.example", envInitContainerInjection: "FALSE", envProbesInjection: "no",
		envLoginShell: "True", envHeadClusterIPService: "true", envGCSFTRedisCleanup: "false", envRequeueSeconds: "60"})
	if err != nil {
		t.Fatal(err)
	}
	if o.clusterDomain != "corp.example" || o.initInjection || !o.probes || !o.loginShell || !o.headClusterIP || o.redisCleanup || o.resync != time.Minute {
		t.Errorf("from KubeRay's env: %+v", o)
	}
	if o, err := parse(t, map[string]string{envClusterDomain: "corp.example", envRequeueSeconds: "soon"}, "--cluster-domain=other.example"); err != nil ||
		o.clusterDomain != "other.example" || o.resync != 5*time.Minute {
		t.Errorf("flag over env, a requeue that is not a number: %s, %s, %v", o.clusterDomain, o.resync, err)
	}
	if _, err := parse(t, map[string]string{envRequeueSeconds: "0"}); err == nil || !strings.Contains(err.Error(), envRequeueSeconds) {
		t.Errorf("a requeue of 0: %v, want it refused", err)
	}
}
