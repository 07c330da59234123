// Package features defines kray's feature gates, set with --feature-gates=Name=true,...
package features

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/component-base/featuregate"
)

// WorkerPodEventBatching delays the reconcile that a pod event or a Kruise workload event triggers by a short
// window, so a burst of events (a large scale-up, Kruise's status writes for each pod, a new cluster's head
// and workers coming up) becomes a few reconciles and status writes. An event that shows the head going down
// is never delayed. Beta, on by default.
const WorkerPodEventBatching featuregate.Feature = "WorkerPodEventBatching"

// RayMultiHostIndexing labels the workers of single-host groups with their replica index too (KubeRay's gate
// of the same name). Multi-host groups are labelled and kept whole whatever the gate says. Off by default,
// unlike KubeRay v1.6+: kray labels a pod after Kruise creates it, one more write per worker pod.
const RayMultiHostIndexing featuregate.Feature = "RayMultiHostIndexing"

// RayCronJob runs the RayCronJob controller (KubeRay's gate of the same name, alpha and off by default, as
// here): with it off, RayCronJobs are stored but nothing starts their RayJobs.
const RayCronJob featuregate.Feature = "RayCronJob"

// RayJobDeletionPolicy lets a RayJob's deletionStrategy (onSuccess/onFailure, deletionRules) run (KubeRay's
// gate of the same name, beta and on by default since KubeRay v1.6, as here); with it off such a RayJob is
// refused with KubeRay's message.
const RayJobDeletionPolicy featuregate.Feature = "RayJobDeletionPolicy"

// The other gates of KubeRay v1.7, accepted by name with KubeRay's defaults so that KubeRay's operator
// arguments start kray. RayServiceIncrementalUpgrade turns the RayService upgrade type
// NewClusterWithIncrementalUpgrade on (off, it acts as None); RayClusterStatusConditions names a feature
// kray always has; RayClusterNetworkPolicy serves spec.networkPolicy, RayClusterHistoryServer
// historyServerOptions and GCSFaultToleranceEmbeddedStorage the RocksDB GCS fault tolerance backend, each
// refused while its gate is off, as KubeRay does; the rest name features kray does not implement yet (see
// Warnings).
const (
	RayClusterStatusConditions       featuregate.Feature = "RayClusterStatusConditions"
	RayServiceIncrementalUpgrade     featuregate.Feature = "RayServiceIncrementalUpgrade"
	SidecarSubmitterRestart          featuregate.Feature = "SidecarSubmitterRestart"
	RayClusterNetworkPolicy          featuregate.Feature = "RayClusterNetworkPolicy"
	GCSFaultToleranceEmbeddedStorage featuregate.Feature = "GCSFaultToleranceEmbeddedStorage"
	RayClusterMTLS                   featuregate.Feature = "RayClusterMTLS"
	RayClusterHistoryServer          featuregate.Feature = "RayClusterHistoryServer"
	KubernetesWAS                    featuregate.Feature = "KubernetesWAS"
)

var specs = map[featuregate.Feature]featuregate.FeatureSpec{
	WorkerPodEventBatching:           {Default: true, PreRelease: featuregate.Beta},
	RayMultiHostIndexing:             {Default: false, PreRelease: featuregate.Beta},
	RayJobDeletionPolicy:             {Default: true, PreRelease: featuregate.Beta},
	RayClusterStatusConditions:       {Default: true, PreRelease: featuregate.Beta},
	RayServiceIncrementalUpgrade:     {Default: true, PreRelease: featuregate.Beta},
	RayCronJob:                       {Default: false, PreRelease: featuregate.Alpha},
	SidecarSubmitterRestart:          {Default: false, PreRelease: featuregate.Alpha},
	RayClusterNetworkPolicy:          {Default: false, PreRelease: featuregate.Alpha},
	GCSFaultToleranceEmbeddedStorage: {Default: false, PreRelease: featuregate.Alpha},
	RayClusterMTLS:                   {Default: false, PreRelease: featuregate.Alpha},
	RayClusterHistoryServer:          {Default: false, PreRelease: featuregate.Alpha},
	KubernetesWAS:                    {Default: false, PreRelease: featuregate.Alpha},
}

// notImplemented names, for each KubeRay gate whose feature kray does not have yet, what an object would
// ask for: such an object is refused, whatever the gate says.
var notImplemented = map[featuregate.Feature]string{
	SidecarSubmitterRestart: "restarting a SidecarMode submitter container (it needs restartPolicy on a regular container of the head pod, which OpenKruise v1.9's webhook refuses in an Advanced StatefulSet)",
	KubernetesWAS:           "scheduling through the Kubernetes Workload API (it needs spec.schedulingGroup, a Kubernetes 1.36 pod field, on every pod; OpenKruise v1.9's CRDs prune pod fields newer than its Kubernetes 1.32 types)",
}

// NotImplemented reports whether gate names a feature kray does not have yet.
func NotImplemented(gate featuregate.Feature) bool {
	_, ok := notImplemented[gate]
	return ok
}

// Warnings says, one line per gate in name order, where g asks for what kray does not do: a gate on whose
// feature kray does not implement yet, and RayClusterStatusConditions off (kray always writes them).
func Warnings(g featuregate.FeatureGate) []string {
	var out []string
	for gate, what := range notImplemented {
		if g.Enabled(gate) {
			out = append(out, fmt.Sprintf("feature gate %s is on, but kray does not implement %s yet: objects that ask for it are refused with a condition and a Warning event", gate, what))
		}
	}
	if !g.Enabled(RayClusterStatusConditions) {
		out = append(out, fmt.Sprintf("feature gate %s is off, but kray always writes RayCluster conditions", RayClusterStatusConditions))
	}
	sort.Strings(out)
	return out
}

// New returns a feature gate with kray's features at their defaults.
func New() featuregate.MutableFeatureGate {
	g := featuregate.NewFeatureGate()
	if err := g.Add(specs); err != nil {
		panic(err) // the specs above are static and valid
	}
	return g
}

// Flag adapts a feature gate to the standard flag package: "Name=true,Other=false".
type Flag struct {
	Gate featuregate.MutableFeatureGate
}

// String is empty: the flag's value is only what the user set (see Known for the defaults).
func (f Flag) String() string { return "" }

// Known lists the gates and their defaults, for --help.
func Known() string {
	var out []string
	for name, spec := range specs {
		out = append(out, fmt.Sprintf("%s=%t (%s)", name, spec.Default, spec.PreRelease))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// Set parses "Name=bool" pairs separated by commas; an unknown name or a non-boolean value is an error.
func (f Flag) Set(value string) error {
	m := map[string]bool{}
	for _, pair := range strings.Split(value, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		name, v, ok := strings.Cut(pair, "=")
		if !ok {
			return fmt.Errorf("feature gate %q: want Name=true or Name=false", pair)
		}
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("feature gate %s: %q is not a boolean", name, v)
		}
		m[strings.TrimSpace(name)] = b
	}
	return f.Gate.SetFromMap(m)
}
