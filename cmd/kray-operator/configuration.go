package main

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/operatorconfig"
)

// configurationFlags are the flags, kray's and KubeRay's names, that set what a Configuration file sets: with
// --config they may not be given (KubeRay ignores them silently).
var configurationFlags = []string{
	"metrics-bind-address", "metrics-addr", "metrics-secure", "health-probe-bind-address",
	"leader-elect", "enable-leader-election", "leader-election-namespace",
	"max-concurrent-reconciles", "reconcile-concurrency", "watch-namespaces", "watch-namespace",
	"kube-api-qps", "qps", "kube-api-burst", "burst", "enable-metrics",
	"log-file-path", "log-stdout-encoder", "log-file-encoder", "batch-scheduler", "enable-batch-scheduler", "use-kubernetes-proxy",
}

// applyConfiguration reads KubeRay's Configuration file at path into o (set are the flags given): every field
// acts as in KubeRay, metrics are served over plain HTTP at metricsAddr as KubeRay serves them, and
// reconcileConcurrency sets every controller's workers (each kray-only worker flag given still wins). It
// returns the warnings to log at start, or an error naming the file and field.
func applyConfiguration(path string, fs *flag.FlagSet, set map[string]bool, o *options) ([]string, error) {
	var clash []string
	for _, f := range configurationFlags {
		if set[f] {
			clash = append(clash, "--"+f)
		}
	}
	if len(clash) > 0 {
		return nil, fmt.Errorf("--config %s: %s set what the Configuration file sets; set it in the file instead", path, strings.Join(clash, ", "))
	}
	c, err := operatorconfig.Load(path)
	if err != nil {
		return nil, err
	}
	var errs []error
	refuse := func(field, why string) {
		errs = append(errs, fmt.Errorf("Configuration file %s: %s: %s", path, field, why))
	}
	if c.LogFile != "" {
		refuse("logFile", "kray logs to stderr only")
	}
	if c.BatchScheduler != "" || c.EnableBatchScheduler {
		refuse("batchScheduler/enableBatchScheduler", "batch schedulers are not supported by kray yet")
	}
	if c.UseKubernetesProxy {
		refuse("useKubernetesProxy", "kray calls Ray directly or through --ray-dashboard-address, --ray-serve-probe-address and --ray-gcs-address")
	}
	if c.LogStdoutEncoder != "" && !set["zap-encoder"] {
		if err := fs.Set("zap-encoder", c.LogStdoutEncoder); err != nil {
			refuse("logStdoutEncoder", err.Error())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	o.metricsAddr, o.secureMetrics = c.MetricsAddr, false
	o.probeAddr = c.ProbeAddr
	o.leaderElect, o.leaderElectNS = *c.EnableLeaderElection, c.LeaderElectionNamespace
	o.concurrency = c.ReconcileConcurrency
	if !set["rayjob-max-concurrent-reconciles"] {
		o.jobWorkers = c.ReconcileConcurrency
	}
	if !set["rayservice-max-concurrent-reconciles"] {
		o.serviceWorker = c.ReconcileConcurrency
	}
	o.namespaces = c.WatchNamespace
	o.qps, o.burst = *c.QPS, *c.Burst
	if c.DeleteRayJobAfterJobFinishes && !set["delete-rayjob-cr-after-job-finishes"] {
		o.deleteJobs = true
	}
	o.podDefaults = builder.PodDefaults{
		HeadSidecars:   slices.Clone(c.HeadSidecarContainers),
		WorkerSidecars: slices.Clone(c.WorkerSidecarContainers),
		Env:            slices.Clone(c.DefaultContainerEnvs),
		Labels:         c.DefaultPodLabels,
		Annotations:    c.DefaultPodAnnotations,
	}
	var warnings []string
	if !c.EnableMetrics {
		warnings = append(warnings, "Configuration enableMetrics is false: kray always emits KubeRay's metric series at metricsAddr")
	}
	return warnings, nil
}
