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
// of the same name, alpha and off by default in KubeRay v1.5.0, as here). Multi-host groups are labelled and
// kept whole whatever the gate says.
const RayMultiHostIndexing featuregate.Feature = "RayMultiHostIndexing"

// RayJobDeletionPolicy lets a RayJob's deletionStrategy (onSuccess/onFailure, deletionRules) run (KubeRay's
// gate of the same name, alpha and off by default in KubeRay v1.5.0, as here); with it off such a RayJob is
// refused with KubeRay's message.
const RayJobDeletionPolicy featuregate.Feature = "RayJobDeletionPolicy"

var specs = map[featuregate.Feature]featuregate.FeatureSpec{
	WorkerPodEventBatching: {Default: true, PreRelease: featuregate.Beta},
	RayMultiHostIndexing:   {Default: false, PreRelease: featuregate.Alpha},
	RayJobDeletionPolicy:   {Default: false, PreRelease: featuregate.Alpha},
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
