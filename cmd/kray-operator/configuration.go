package main

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/operatorconfig"
)

// configurationFlags are, for each Configuration field that an operator flag also sets, those flags (kray's
// and KubeRay's names).
var configurationFlags = map[string][]string{
	"metricsAddr":                  {"metrics-bind-address", "metrics-addr", "metrics-secure"},
	"probeAddr":                    {"health-probe-bind-address"},
	"enableLeaderElection":         {"leader-elect", "enable-leader-election"},
	"leaderElectionNamespace":      {"leader-election-namespace"},
	"reconcileConcurrency":         {"max-concurrent-reconciles", "reconcile-concurrency"},
	"watchNamespace":               {"watch-namespaces", "watch-namespace"},
	"qps":                          {"kube-api-qps", "qps"},
	"burst":                        {"kube-api-burst", "burst"},
	"logStdoutEncoder":             {"zap-encoder", "log-stdout-encoder"},
	"logFile":                      {"log-file-path"},
	"logFileEncoder":               {"log-file-encoder"},
	"batchScheduler":               {"batch-scheduler"},
	"enableBatchScheduler":         {"enable-batch-scheduler"},
	"useKubernetesProxy":           {"use-kubernetes-proxy"},
	"deleteRayJobAfterJobFinishes": {"delete-rayjob-cr-after-job-finishes"},
	"enableMetrics":                {"enable-metrics"},
}

// applyConfiguration reads KubeRay's Configuration file at path into o (set are the flags given). A field the
// file sets acts as in KubeRay, and a flag that sets the same thing may not be given beside it (KubeRay
// ignores such flags silently). A field the file leaves out keeps its flag when one is given, else takes
// KubeRay's default, as in KubeRay: metrics at :8080 over plain HTTP (KubeRay's chart probes them there),
// probes at :8082, leader election on, one worker per controller, 100 QPS, burst 200. reconcileConcurrency
// sets every controller's workers (a kray-only worker flag given still wins). It returns the warnings to log
// at start, or an error naming the file and the field.
func applyConfiguration(path string, fs *flag.FlagSet, set map[string]bool, o *options) ([]string, error) {
	c, err := operatorconfig.Load(path)
	if err != nil {
		return nil, err
	}
	var clash []string
	for field, flags := range configurationFlags {
		for _, f := range flags {
			if c.Sets(field) && set[f] {
				clash = append(clash, fmt.Sprintf("--%s (the file's %s)", f, field))
			}
		}
	}
	if len(clash) > 0 {
		sort.Strings(clash)
		return nil, fmt.Errorf("--config %s: %s set what the Configuration file sets; set it in one place", path, strings.Join(clash, ", "))
	}
	flagGiven := func(field string) bool {
		return slices.ContainsFunc(configurationFlags[field], func(f string) bool { return set[f] })
	}
	// use reports whether the field's value (the file's, else KubeRay's default) applies: no flag sets it.
	use := func(field string) bool { return c.Sets(field) || !flagGiven(field) }

	var errs []error
	var warnings []string
	refuse := func(field, why string) {
		errs = append(errs, fmt.Errorf("Configuration file %s: %s: %s", path, field, why))
	}
	if c.LogFile != "" {
		refuse("logFile", "kray logs to stderr only")
	}
	if c.Sets("batchScheduler") || c.Sets("enableBatchScheduler") {
		name, warning, err := batchScheduler(c.BatchScheduler, c.EnableBatchScheduler, o.gates)
		if err != nil {
			refuse("batchScheduler/enableBatchScheduler", err.Error())
		}
		if warning != "" {
			warnings = append(warnings, warning)
		}
		o.batchScheduler = name
	}
	if c.UseKubernetesProxy {
		o.kubernetesProxy = true
	}
	if c.Sets("logStdoutEncoder") {
		if err := fs.Set("zap-encoder", c.LogStdoutEncoder); err != nil {
			refuse("logStdoutEncoder", err.Error())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if use("metricsAddr") {
		o.metricsAddr, o.secureMetrics = c.MetricsAddr, false
	}
	if use("probeAddr") {
		o.probeAddr = c.ProbeAddr
	}
	if use("enableLeaderElection") {
		o.leaderElect = *c.EnableLeaderElection
	}
	if use("leaderElectionNamespace") {
		o.leaderElectNS = c.LeaderElectionNamespace
	}
	if use("reconcileConcurrency") {
		o.concurrency = c.ReconcileConcurrency
		if !set["rayjob-max-concurrent-reconciles"] {
			o.jobWorkers = c.ReconcileConcurrency
		}
		if !set["rayservice-max-concurrent-reconciles"] {
			o.serviceWorker = c.ReconcileConcurrency
		}
	}
	if use("watchNamespace") {
		o.namespaces = c.WatchNamespace
	}
	if use("qps") {
		o.qps = *c.QPS
	}
	if use("burst") {
		o.burst = *c.Burst
	}
	if c.DeleteRayJobAfterJobFinishes {
		// KubeRay v1.7 documents the field but reads only its environment variable; kray does what it says.
		o.deleteJobs = true
		warnings = append(warnings, "Configuration deleteRayJobAfterJobFinishes is true: a RayJob with shutdownAfterJobFinishes is deleted once its job ends "+
			"(KubeRay v1.7 ignores this field and deletes only when "+envDeleteRayJobAfterJobFinishes+" is true)")
	}
	o.podDefaults = builder.PodDefaults{
		HeadSidecars:   slices.Clone(c.HeadSidecarContainers),
		WorkerSidecars: slices.Clone(c.WorkerSidecarContainers),
		Env:            slices.Clone(c.DefaultContainerEnvs),
		Labels:         c.DefaultPodLabels,
		Annotations:    c.DefaultPodAnnotations,
	}
	if c.Sets("enableMetrics") && !c.EnableMetrics {
		warnings = append(warnings, "Configuration enableMetrics is false: kray always emits KubeRay's metric series")
	}
	return warnings, nil
}
