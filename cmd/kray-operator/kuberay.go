package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kray-project/kray/internal/controller/rayjob"
	"github.com/kray-project/kray/pkg/constants"
)

// KubeRay's operator environment variables that set kray's flag defaults, read as KubeRay v1.7 reads them.
const (
	envClusterDomain          = "CLUSTER_DOMAIN"
	envInitContainerInjection = "ENABLE_INIT_CONTAINER_INJECTION"
	envProbesInjection        = "ENABLE_PROBES_INJECTION"
	envLoginShell             = "ENABLE_LOGIN_SHELL"
	envHeadClusterIPService   = "ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE"
	envGCSFTRedisCleanup      = "ENABLE_GCS_FT_REDIS_CLEANUP"
	envRequeueSeconds         = "RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV"

	envDeleteRayJobAfterJobFinishes = "DELETE_RAYJOB_CR_AFTER_JOB_FINISHES"
	envTransitionGracePeriodSeconds = "RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS"
	envStatusCheckTimeoutSeconds    = "RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS"

	envRandomPodDelete          = "ENABLE_RANDOM_POD_DELETE"
	envDeterministicHeadPodName = "ENABLE_DETERMINISTIC_HEAD_POD_NAME"
	envIngressOnOpenShift       = "USE_INGRESS_ON_OPENSHIFT"
)

// kubeRayEnv are the flag defaults KubeRay's environment variables give.
type kubeRayEnv struct {
	clusterDomain                                    string
	initInjection, probes, loginShell, headClusterIP bool
	redisCleanup, zeroDowntime, deleteJobs           bool
	resync, grace, statusCheck                       time.Duration
	// warnings are KubeRay settings read as KubeRay reads them where that ignores a value.
	warnings []string
}

// kubeRayEnvDefaults reads KubeRay's environment: a switch on by default is off only when "false" and one
// off by default on only when "true" (any case), as in KubeRay; an empty CLUSTER_DOMAIN is the default
// domain; a requeue period that is not a number is the default 300 s, as in KubeRay, and one below 1 s is
// refused (kray always resyncs); a transition grace period that is not a positive whole number of seconds is
// refused rather than ignored; a job status check timeout that is not a positive whole number of seconds is
// the default 300 s, as in KubeRay, with a warning.
func kubeRayEnvDefaults(getenv func(string) string) (kubeRayEnv, error) {
	e := kubeRayEnv{
		zeroDowntime:  !strings.EqualFold(getenv(constants.EnvEnableZeroDowntime), "false"),
		deleteJobs:    strings.EqualFold(getenv(envDeleteRayJobAfterJobFinishes), "true"),
		grace:         rayjob.DefaultTransitionGracePeriod,
		statusCheck:   rayjob.DefaultStatusCheckTimeout,
		clusterDomain: constants.DefaultClusterDomain,
		initInjection: !strings.EqualFold(getenv(envInitContainerInjection), "false"),
		probes:        !strings.EqualFold(getenv(envProbesInjection), "false"),
		loginShell:    strings.EqualFold(getenv(envLoginShell), "true"),
		headClusterIP: strings.EqualFold(getenv(envHeadClusterIPService), "true"),
		redisCleanup:  !strings.EqualFold(getenv(envGCSFTRedisCleanup), "false"),
		resync:        5 * time.Minute,
	}
	if d := getenv(envClusterDomain); d != "" {
		e.clusterDomain = d
	}
	if v := getenv(envTransitionGracePeriodSeconds); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return e, fmt.Errorf("%s must be a positive whole number of seconds, got %q", envTransitionGracePeriodSeconds, v)
		}
		e.grace = time.Duration(n) * time.Second
	}
	if v := getenv(envStatusCheckTimeoutSeconds); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			e.statusCheck = time.Duration(n) * time.Second
		} else {
			e.warnings = append(e.warnings, fmt.Sprintf("%s=%q is not a positive whole number of seconds: the default %s applies, as in KubeRay", envStatusCheckTimeoutSeconds, v, rayjob.DefaultStatusCheckTimeout))
		}
	}
	if strings.EqualFold(getenv(envRandomPodDelete), "true") {
		e.warnings = append(e.warnings, envRandomPodDelete+"=true: kray never deletes workers at random; without autoscaling CloneSet chooses which go, with it only the pods the autoscaler names")
	}
	if strings.EqualFold(getenv(envDeterministicHeadPodName), "false") {
		e.warnings = append(e.warnings, envDeterministicHeadPodName+"=false: the head pod is always <cluster>-head-0 in kray")
	}
	if getenv(envIngressOnOpenShift) != "" {
		e.warnings = append(e.warnings, envIngressOnOpenShift+" is set: kray makes Ingresses only, never OpenShift Routes")
	}
	if n, err := strconv.Atoi(getenv(envRequeueSeconds)); err == nil {
		if n < 1 {
			return e, fmt.Errorf("%s must be at least 1 (seconds), got %d", envRequeueSeconds, n)
		}
		e.resync = time.Duration(n) * time.Second
	}
	return e, nil
}

// kubeRayFlags are KubeRay's operator flags (ray-operator/main.go) that have no flag of the same name in
// kray, so that KubeRay's operator arguments start kray: each acts as its kray counterpart, or is refused at
// start, naming it, where kray has no such feature.
type kubeRayFlags struct {
	metricsAddr      string
	leaderElect      bool
	enableMetrics    bool
	logStdoutEncoder string
	logFilePath      string
	logFileEncoder   string
	config           string
	batchScheduler   string
	enableBatch      bool
	forcedUpgrade    bool
}

// bindKubeRayFlags registers KubeRay's flag names on fs: the aliases write o's fields directly (sharing
// their defaults), the others are read by apply.
func bindKubeRayFlags(fs *flag.FlagSet, o *options) *kubeRayFlags {
	k := &kubeRayFlags{}
	fs.IntVar(&o.concurrency, "reconcile-concurrency", o.concurrency, "KubeRay's name for --max-concurrent-reconciles")
	fs.StringVar(&o.namespaces, "watch-namespace", o.namespaces, "KubeRay's name for --watch-namespaces")
	fs.Float64Var(&o.qps, "qps", o.qps, "KubeRay's name for --kube-api-qps")
	fs.IntVar(&o.burst, "burst", o.burst, "KubeRay's name for --kube-api-burst")
	fs.StringVar(&k.metricsAddr, "metrics-addr", "", "KubeRay's metrics address: serves the metrics over plain HTTP there, as KubeRay does (replaces --metrics-bind-address and --metrics-secure)")
	fs.BoolVar(&k.leaderElect, "enable-leader-election", false, "KubeRay's name for --leader-elect, honoured when given; kray elects no leader unless asked")
	fs.BoolVar(&k.enableMetrics, "enable-metrics", true, "KubeRay's switch of its control-plane metrics; kray always emits KubeRay's series (--metrics-bind-address=0 turns the endpoint off)")
	fs.StringVar(&k.logStdoutEncoder, "log-stdout-encoder", "", "KubeRay's name for --zap-encoder (json or console)")
	fs.StringVar(&k.logFilePath, "log-file-path", "", "KubeRay's log file: not supported by kray (it logs to stderr)")
	fs.StringVar(&k.logFileEncoder, "log-file-encoder", "", "KubeRay's log file encoder: not supported by kray (it logs to stderr)")
	fs.StringVar(&k.config, "config", "", "KubeRay's operator Configuration file (config.ray.io/v1alpha1): a field it sets may not also be given as a flag; a field it leaves out keeps its flag, else takes KubeRay's default")
	fs.StringVar(&k.batchScheduler, "batch-scheduler", "", "KubeRay's batch scheduler of Ray pods: scheduler-plugins (coscheduling), volcano, yunikorn or kai-scheduler")
	fs.BoolVar(&k.enableBatch, "enable-batch-scheduler", false, "KubeRay's deprecated switch for --batch-scheduler=volcano")
	fs.BoolVar(&o.kubernetesProxy, "use-kubernetes-proxy", false, "call Ray's dashboard and Serve proxies through the API server's services/proxy and pods/proxy subresources, as KubeRay does (for NetworkPolicies that keep the operator out, or an operator outside the pod network); GCS calls (drains) still go to the head Service or --ray-gcs-address")
	fs.BoolVar(&k.forcedUpgrade, "forced-cluster-upgrade", false, "deprecated in KubeRay, where it does nothing; accepted")
	return k
}

// apply carries the KubeRay flags set on fs (parsed, with zap's flags bound) into o, returning the warnings
// to log at start, or the error of a flag whose feature kray does not have.
func (k *kubeRayFlags) apply(fs *flag.FlagSet, o *options) ([]string, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var warnings []string
	var errs []error
	if k.config != "" {
		w, err := applyConfiguration(k.config, fs, set, o)
		if err != nil {
			return nil, err
		}
		warnings = append(warnings, w...)
	}
	if !set["config"] || set["batch-scheduler"] || set["enable-batch-scheduler"] {
		name, warning, err := batchScheduler(k.batchScheduler, k.enableBatch, o.gates)
		if err != nil {
			errs = append(errs, err)
		}
		if warning != "" {
			warnings = append(warnings, warning)
		}
		o.batchScheduler = name
	}
	switch {
	case set["metrics-addr"] && set["metrics-secure"] && o.secureMetrics:
		// Taking the pair would turn authentication off although it was asked for.
		errs = append(errs, errors.New("--metrics-addr serves KubeRay's plain HTTP metrics and cannot be given with --metrics-secure=true; use --metrics-bind-address for authenticated metrics"))
	case set["metrics-addr"]:
		o.metricsAddr, o.secureMetrics = k.metricsAddr, false // KubeRay's endpoint, as its chart probes it
	}
	if set["enable-leader-election"] && !set["leader-elect"] {
		o.leaderElect = k.leaderElect
	}
	if !k.enableMetrics {
		warnings = append(warnings, "--enable-metrics=false: kray always emits KubeRay's metric series; --metrics-bind-address=0 turns the metrics endpoint off")
	}
	if set["log-stdout-encoder"] && !set["zap-encoder"] {
		if err := fs.Set("zap-encoder", k.logStdoutEncoder); err != nil {
			errs = append(errs, fmt.Errorf("--log-stdout-encoder: %w", err))
		}
	}
	if k.forcedUpgrade {
		warnings = append(warnings, "--forced-cluster-upgrade is deprecated in KubeRay and does nothing there or here")
	}
	for _, r := range []struct {
		on   bool
		flag string
		why  string
	}{
		{k.logFilePath != "", "--log-file-path", "kray logs to stderr only"},
	} {
		if r.on {
			errs = append(errs, fmt.Errorf("%s: %s", r.flag, r.why))
		}
	}
	return warnings, errors.Join(errs...)
}
