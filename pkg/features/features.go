// Package features defines kray's feature gates, set with --feature-gates=Name=true,...
package features

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/component-base/featuregate"
)

// WorkerPodEventBatching delays the reconcile a worker pod event triggers by a short window, so a burst of
// pod events (a large scale-up) becomes a few reconciles and status writes. Head pod events are never
// delayed. Beta, on by default.
const WorkerPodEventBatching featuregate.Feature = "WorkerPodEventBatching"

// RayMultiHostIndexing labels worker pods with their replica index and, for groups with numOfHosts above
// 1, their replica name and host index, and keeps those replicas whole (KubeRay's gate of the same name).
// Beta, on by default.
const RayMultiHostIndexing featuregate.Feature = "RayMultiHostIndexing"

var specs = map[featuregate.Feature]featuregate.FeatureSpec{
	WorkerPodEventBatching: {Default: true, PreRelease: featuregate.Beta},
	RayMultiHostIndexing:   {Default: true, PreRelease: featuregate.Beta},
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
