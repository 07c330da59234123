// Command kray-operator runs kray's RayCluster controller, in cluster or out of cluster with --kubeconfig.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	schedv1alpha1 "github.com/kray-project/kray/api/schedulerplugins/v1alpha1"
	rayv1 "github.com/kray-project/kray/api/v1"
	volcanov1beta1 "github.com/kray-project/kray/api/volcano/v1beta1"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/internal/controller/raycronjob"
	"github.com/kray-project/kray/internal/controller/rayjob"
	"github.com/kray-project/kray/internal/controller/rayservice"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/batchscheduler"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/dashboard"
	"github.com/kray-project/kray/pkg/features"
	"github.com/kray-project/kray/pkg/metrics"
	"github.com/kray-project/kray/pkg/ray"
	"github.com/kray-project/kray/pkg/validation"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type options struct {
	metricsAddr   string
	probeAddr     string
	pprofAddr     string
	leaderElect   bool
	leaderElectNS string
	concurrency   int
	jobWorkers    int
	deleteJobs    bool
	jobGrace      time.Duration
	statusCheck   time.Duration
	qps           float64
	burst         int
	namespaces    string
	clusterDomain string
	secureMetrics bool
	rayGCSAddress string
	rayDashboard  string
	serveProbe    string
	// kubernetesProxy calls dashboards and Serve proxies through the API server (KubeRay's
	// --use-kubernetes-proxy).
	kubernetesProxy bool
	serviceWorker   int
	zeroDowntime    bool
	redisCleanup    bool
	initInjection   bool
	probes          bool
	loginShell      bool
	headClusterIP   bool
	resync          time.Duration
	gates           featuregate.MutableFeatureGate
	// batchScheduler is the batch scheduler of Ray pods (--batch-scheduler), "" for the default scheduler.
	batchScheduler string
	// podDefaults are what a Configuration file adds to every Ray pod.
	podDefaults builder.PodDefaults
	// ingressPrefixes are the prefixes of the RayCluster annotations copied onto head Ingresses; nil is
	// builder.DefaultIngressAnnotationPrefixes.
	ingressPrefixes []string
	// operatorNamespace and operatorPodLabels say who the operator's pods are, for the operator's ingress
	// rule in the NetworkPolicies of spec.networkPolicy; both empty, there is none.
	operatorNamespace string
	operatorPodLabels map[string]string
	// warnings are said at start: settings accepted from KubeRay that kray does not act on.
	warnings []string
}

// operatorPeer is who the operator's pods are as a NetworkPolicy peer, nil when the flags do not say.
func (o options) operatorPeer() *networkingv1.NetworkPolicyPeer {
	if o.operatorNamespace == "" {
		return nil
	}
	return &networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: o.operatorNamespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: o.operatorPodLabels},
	}
}

func parseFlags(fs *flag.FlagSet, args []string, getenv func(string) string) (options, zap.Options, error) {
	o := options{gates: features.New()}
	kenv, envErr := kubeRayEnvDefaults(getenv)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "address the Prometheus metrics endpoint binds to; \"0\" disables it")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address the /healthz and /readyz endpoints bind to")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "address Go's /debug/pprof endpoints bind to, for profiling the operator; empty disables them")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader so that only one replica reconciles")
	fs.StringVar(&o.leaderElectNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace)")
	fs.IntVar(&o.concurrency, "max-concurrent-reconciles", 4, "RayClusters reconciled in parallel")
	fs.IntVar(&o.jobWorkers, "rayjob-max-concurrent-reconciles", 4, "RayJobs reconciled in parallel, by workers of their own, so RayJobs waiting on slow dashboards never hold up RayClusters")
	fs.BoolVar(&o.deleteJobs, "delete-rayjob-cr-after-job-finishes", kenv.deleteJobs, "shutdownAfterJobFinishes deletes the RayJob itself (and with it everything made for it), not only its cluster; default from "+envDeleteRayJobAfterJobFinishes)
	fs.DurationVar(&o.jobGrace, "rayjob-deployment-status-transition-grace-period", kenv.grace, "how long a RayJob may stay Running after its Ray job ended before it is ended anyway; default from "+envTransitionGracePeriodSeconds+" (seconds), else 5m")
	fs.DurationVar(&o.statusCheck, "rayjob-status-check-timeout", kenv.statusCheck, "how long the reads of a running Ray job's status from the dashboard may keep failing before its RayJob fails with JobStatusCheckTimeoutExceeded; default from "+envStatusCheckTimeoutSeconds+" (seconds), else 5m")
	fs.Float64Var(&o.qps, "kube-api-qps", 50, "client-side QPS limit towards the API server")
	fs.IntVar(&o.burst, "kube-api-burst", 100, "client-side burst limit towards the API server")
	fs.StringVar(&o.namespaces, "watch-namespaces", "", "comma-separated namespaces to watch; empty watches all")
	fs.StringVar(&o.clusterDomain, "cluster-domain", kenv.clusterDomain, "cluster DNS domain used in the head Service FQDN; default from "+envClusterDomain)
	fs.StringVar(&o.rayGCSAddress, "ray-gcs-address", "", "host:port of the Ray GCS used to drain workers of every cluster, instead of each cluster's head Service; for an operator running outside the cluster network")
	fs.StringVar(&o.rayDashboard, "ray-dashboard-address", "", "http://host:port of the Ray dashboard used for the Job and Serve API calls, instead of each cluster's head Service; {namespace} and {cluster} are replaced by the cluster's, so one address can tell clusters apart; for an operator running outside the cluster network")
	fs.StringVar(&o.serveProbe, "ray-serve-probe-address", "", "http://host:port of the Serve proxy health check of RayService head pods ("+dashboard.ServeHealthPath+" is appended), instead of http://<pod IP>:<serve port>; {namespace} and {pod} are replaced by the pod's; for an operator running outside the cluster network")
	fs.IntVar(&o.serviceWorker, "rayservice-max-concurrent-reconciles", 4, "RayServices reconciled in parallel, by workers of their own")
	fs.BoolVar(&o.zeroDowntime, "enable-zero-downtime", kenv.zeroDowntime, "a RayService without an upgradeStrategy prepares a new cluster for a changed cluster spec and switches to it once it serves; false acts as upgradeStrategy None; default from "+constants.EnvEnableZeroDowntime)
	fs.BoolVar(&o.redisCleanup, "enable-gcs-ft-redis-cleanup", kenv.redisCleanup, "give Redis GCS fault tolerant clusters a finalizer that deletes their Redis data when they are deleted; default from KubeRay's "+envGCSFTRedisCleanup)
	fs.BoolVar(&o.initInjection, "enable-init-container-injection", kenv.initInjection, "add the wait-gcs-ready init container to worker pods (left out under upgradeStrategy RollingUpdate anyway); default from KubeRay's "+envInitContainerInjection)
	fs.BoolVar(&o.probes, "enable-probes-injection", kenv.probes, "add liveness and readiness probes to Ray containers that have none; default from KubeRay's "+envProbesInjection)
	fs.BoolVar(&o.loginShell, "enable-login-shell", kenv.loginShell, "run the generated Ray command in a login shell, bash -lc; default from KubeRay's "+envLoginShell)
	fs.BoolVar(&o.headClusterIP, "enable-head-cluster-ip-service", kenv.headClusterIP, "give the default head Service a cluster IP instead of making it headless; default from KubeRay's "+envHeadClusterIPService)
	fs.DurationVar(&o.resync, "raycluster-resync-period", kenv.resync, "how often a settled RayCluster is reconciled without any event; default from KubeRay's "+envRequeueSeconds+" (seconds), else 5m")
	fs.BoolVar(&o.secureMetrics, "metrics-secure", true, "serve metrics over HTTPS, authenticating (TokenReview) and authorizing (SubjectAccessReview) every scrape; false serves plain HTTP")
	fs.Func("ingress-annotation-prefixes", "comma-separated prefixes of the RayCluster annotations copied onto the head Ingress (a key naming a snippet only when a prefix names it in full); empty copies none; default "+
		strings.Join(builder.DefaultIngressAnnotationPrefixes, ","), func(v string) error {
		o.ingressPrefixes = []string{}
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				o.ingressPrefixes = append(o.ingressPrefixes, p)
			}
		}
		return nil
	})
	fs.StringVar(&o.operatorNamespace, "operator-namespace", "", "the namespace of the operator's pods: with --operator-pod-labels, the head NetworkPolicy of a RayCluster's spec.networkPolicy lets them in on the ports the operator calls (GCS, dashboard, Serve health check); empty adds no such rule")
	fs.Func("operator-pod-labels", "comma-separated key=value labels of the operator's pods (see --operator-namespace)", func(v string) error {
		m, err := labels.ConvertSelectorToLabelsMap(v)
		o.operatorPodLabels = m
		return err
	})
	fs.Var(features.Flag{Gate: o.gates}, "feature-gates", "comma-separated Name=true|false pairs; known gates and defaults: "+features.Known())
	kubeRay := bindKubeRayFlags(fs, &o)
	zopts := zap.Options{}
	zopts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, zopts, err
	}
	if envErr != nil {
		return o, zopts, envErr
	}
	warnings, err := kubeRay.apply(fs, &o)
	if err != nil {
		return o, zopts, err
	}
	o.warnings = append(kenv.warnings, warnings...)
	if o.resync < time.Second {
		return o, zopts, fmt.Errorf("--raycluster-resync-period must be at least 1s, got %s", o.resync)
	}
	for flagName, v := range map[string]string{"ray-dashboard-address": o.rayDashboard, "ray-serve-probe-address": o.serveProbe} {
		if v != "" && !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
			return o, zopts, fmt.Errorf("--%s must be an http:// or https:// URL, got %q", flagName, v)
		}
	}
	if o.serviceWorker < 1 {
		return o, zopts, fmt.Errorf("--rayservice-max-concurrent-reconciles must be at least 1, got %d", o.serviceWorker)
	}
	if o.concurrency < 1 {
		return o, zopts, fmt.Errorf("--max-concurrent-reconciles must be at least 1, got %d", o.concurrency)
	}
	if o.jobWorkers < 1 {
		return o, zopts, fmt.Errorf("--rayjob-max-concurrent-reconciles must be at least 1, got %d", o.jobWorkers)
	}
	if o.statusCheck < time.Second {
		return o, zopts, fmt.Errorf("--rayjob-status-check-timeout must be at least 1s, got %s", o.statusCheck)
	}
	if o.jobGrace < time.Second {
		return o, zopts, fmt.Errorf("--rayjob-deployment-status-transition-grace-period must be at least 1s, got %s", o.jobGrace)
	}
	if o.kubernetesProxy && (o.rayDashboard != "" || o.serveProbe != "") {
		return o, zopts, errors.New("--use-kubernetes-proxy sets where the dashboard and Serve proxy calls go: it cannot be given with --ray-dashboard-address or --ray-serve-probe-address")
	}
	if len(o.operatorPodLabels) > 0 && o.operatorNamespace == "" {
		return o, zopts, errors.New("--operator-pod-labels needs --operator-namespace")
	}
	if o.operatorNamespace != "" && len(o.operatorPodLabels) == 0 {
		o.warnings = append(o.warnings, fmt.Sprintf("--operator-namespace=%s without --operator-pod-labels: the head NetworkPolicy of each RayCluster's spec.networkPolicy lets every pod of namespace %s in on the ports the operator calls; give --operator-pod-labels to let in the operator's pods alone",
			o.operatorNamespace, o.operatorNamespace))
	}
	return o, zopts, nil
}

func main() {
	fs := flag.NewFlagSet("kray-operator", flag.ExitOnError)
	ctrlFlags := flag.CommandLine // controller-runtime registers --kubeconfig here
	ctrlFlags.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, f.Name, f.Usage) })
	o, zopts, err := parseFlags(fs, os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zopts)))
	if err := run(o); err != nil {
		ctrl.Log.Error(err, "kray-operator stopped")
		os.Exit(1)
	}
}

// metricsOptions serves metrics over plain HTTP, or with --metrics-secure over HTTPS where every scrape is
// authenticated (TokenReview) and authorized (SubjectAccessReview on GET /metrics).
func metricsOptions(o options) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.secureMetrics {
		m.SecureServing = true
		m.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return m
}

func run(o options) error {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(rayv1.AddToScheme(scheme))
	utilruntime.Must(kruisev1alpha1.AddToScheme(scheme))
	utilruntime.Must(kruisev1beta1.AddToScheme(scheme))
	utilruntime.Must(schedv1alpha1.AddToScheme(scheme))
	utilruntime.Must(volcanov1beta1.AddToScheme(scheme))
	if o.gates.Enabled(features.RayServiceIncrementalUpgrade) {
		utilruntime.Must(gwv1.Install(scheme))
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	var namespaces []string
	for _, ns := range strings.Split(o.namespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			namespaces = append(namespaces, ns)
		}
	}
	cacheOptions := raycluster.CacheOptions(namespaces)
	raycluster.CachePodGroups(&cacheOptions, o.batchScheduler)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	certManager := false
	if o.gates.Enabled(features.RayClusterMTLS) {
		if certManager, err = raycluster.CertManagerServed(dc); err != nil {
			return err
		}
		if certManager {
			raycluster.CacheCertificates(&cacheOptions)
		} else {
			ctrl.Log.Info("the API server does not serve cert-manager.io/v1: RayClusters with tlsOptions are refused until cert-manager is installed and the operator restarts")
		}
	}
	routing := false
	if o.gates.Enabled(features.RayServiceIncrementalUpgrade) {
		if routing, err = rayservice.RoutingServed(dc); err != nil {
			return err
		}
		if routing {
			rayservice.CacheRouting(&cacheOptions)
		} else {
			ctrl.Log.Info("the API server does not serve the Gateway API: incremental RayService upgrades wait until its CRDs are installed and the operator restarts")
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache:  cacheOptions,
		// cert-manager's objects are read as unstructured objects, from the cache like every other kind.
		Client:                  client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Metrics:                 metricsOptions(o),
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "kray-operator.ray.io",
		LeaderElectionNamespace: o.leaderElectNS,
		// The controllers' queues stay client-go's rate-limited delaying queue (controller-runtime's default
		// before v0.23): its timing is what kray's event batching and requeues are measured with.
		Controller: config.Controller{UsePriorityQueue: ptr.To(false)},
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	r := &raycluster.Reconciler{
		Cache:     mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Writer:    shared.ClientWriter(mgr.GetClient(), mgr.GetConfig(), mgr.GetHTTPClient()),
		Events:    shared.Events{Recorder: mgr.GetEventRecorderFor(constants.ControllerName)},
		Options: builder.Options{ClusterDomain: o.clusterDomain, Version: version,
			NoInitContainerInjection: !o.initInjection, NoProbesInjection: !o.probes, LoginShell: o.loginShell, HeadClusterIPService: o.headClusterIP,
			PodDefaults: o.podDefaults, IngressAnnotationPrefixes: o.ingressPrefixes, OperatorPeer: o.operatorPeer()},
		ResyncPeriod: o.resync,
		Ray:          &ray.GRPCDialer{},

		RayGCSAddress:       o.rayGCSAddress,
		DisableRedisCleanup: !o.redisCleanup,
		BatchScheduler:      o.batchScheduler,
		ReplicaIndexing:     o.gates.Enabled(features.RayMultiHostIndexing),
		NetworkPolicies:     o.gates.Enabled(features.RayClusterNetworkPolicy),
		MTLS:                certManager,
		Validation:          validation.ClusterOptions{Gates: o.gates, BatchScheduler: o.batchScheduler, CertManager: certManager},
	}
	if err := raycluster.PodGroupsServed(mgr.GetRESTMapper(), o.batchScheduler); err != nil {
		return err
	}
	setup := raycluster.SetupOptions{Concurrency: o.concurrency}
	if o.gates.Enabled(features.WorkerPodEventBatching) {
		setup.WorkerPodBatch = raycluster.DefaultWorkerPodBatch
	}
	if err := r.SetupWithManager(mgr, setup); err != nil {
		return fmt.Errorf("set up controller: %w", err)
	}
	// Ray's HTTP endpoints: called directly (or at the --ray-*-address flags), or through the API server.
	dashboards, probeHTTP := dashboard.HTTPDialer{HTTP: &http.Client{}}, &http.Client{}
	if o.kubernetesProxy {
		var hc *http.Client
		if o.rayDashboard, o.serveProbe, hc, err = kubernetesProxy(mgr.GetConfig()); err != nil {
			return err
		}
		dashboards, probeHTTP = dashboard.HTTPDialer{HTTP: hc, Proxied: true}, hc
	}
	jobOptions := r.Options
	jobOptions.Scheduling = batchscheduler.Scheduling{Scheduler: o.batchScheduler} // the submitter's
	jobs := &rayjob.Reconciler{
		Cache:             mgr.GetClient(),
		APIReader:         mgr.GetAPIReader(),
		Writer:            shared.ClientWriter(mgr.GetClient(), mgr.GetConfig(), mgr.GetHTTPClient()),
		Events:            shared.Events{Recorder: mgr.GetEventRecorderFor(constants.RayJobControllerName)},
		Dashboards:        dashboards,
		DashboardAddress:  o.rayDashboard,
		Options:           jobOptions,
		DeletionPolicy:    o.gates.Enabled(features.RayJobDeletionPolicy),
		ClusterValidation: r.Validation,

		DeleteRayJobOnShutdown: o.deleteJobs,
		TransitionGracePeriod:  o.jobGrace,
		StatusCheckTimeout:     o.statusCheck,
	}
	if err := jobs.SetupWithManager(mgr, o.jobWorkers); err != nil {
		return fmt.Errorf("set up RayJob controller: %w", err)
	}
	services := &rayservice.Reconciler{
		Cache:             mgr.GetClient(),
		APIReader:         mgr.GetAPIReader(),
		Writer:            shared.ClientWriter(mgr.GetClient(), mgr.GetConfig(), mgr.GetHTTPClient()),
		Events:            shared.Events{Recorder: mgr.GetEventRecorderFor(constants.RayServiceControllerName)},
		Dashboards:        dashboards,
		ProbeHTTP:         probeHTTP,
		DashboardAddress:  o.rayDashboard,
		ServeProbeAddress: o.serveProbe,
		Options:           r.Options,
		ZeroDowntime:      o.zeroDowntime,
		NoGatewayAPI:      o.gates.Enabled(features.RayServiceIncrementalUpgrade) && !routing,
		Validation:        validation.RayServiceOptions{IncrementalUpgrade: o.gates.Enabled(features.RayServiceIncrementalUpgrade), Cluster: r.Validation},
	}
	if err := services.SetupWithManager(mgr, o.serviceWorker); err != nil {
		return fmt.Errorf("set up RayService controller: %w", err)
	}
	if o.gates.Enabled(features.RayCronJob) {
		cronJobs := &raycronjob.Reconciler{
			Cache:      mgr.GetClient(),
			APIReader:  mgr.GetAPIReader(),
			Writer:     shared.ClientWriter(mgr.GetClient(), mgr.GetConfig(), mgr.GetHTTPClient()),
			Events:     shared.Events{Recorder: mgr.GetEventRecorderFor(constants.RayCronJobControllerName)},
			Validation: validation.RayJobOptions{DeletionPolicy: jobs.DeletionPolicy, Cluster: r.Validation},
		}
		if err := cronJobs.SetupWithManager(mgr, o.jobWorkers); err != nil {
			return fmt.Errorf("set up RayCronJob controller: %w", err)
		}
	}
	if err := metrics.RegisterRayServices(mgr.GetClient()); err != nil {
		return fmt.Errorf("register RayService metrics: %w", err)
	}
	if err := metrics.RegisterRayClusters(mgr.GetClient()); err != nil {
		return fmt.Errorf("register RayCluster metrics: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting kray-operator", "version", version, "namespaces", namespaces, "concurrency", o.concurrency, "rayjobConcurrency", o.jobWorkers)
	for _, w := range append(o.warnings, features.Warnings(o.gates)...) {
		ctrl.Log.Info("WARNING: " + w)
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
