package main

import (
	"errors"
	"fmt"

	"k8s.io/component-base/featuregate"

	"github.com/kray-project/kray/pkg/batchscheduler"
	"github.com/kray-project/kray/pkg/features"
)

// batchScheduler is the batch scheduler that KubeRay's --batch-scheduler (name) and deprecated
// --enable-batch-scheduler ask for, validated in KubeRay v1.7's order and words, "" for none; it returns the
// warning to log at start, if any.
func batchScheduler(name string, deprecated bool, gates featuregate.FeatureGate) (string, string, error) {
	if name == "" && !deprecated {
		return "", "", nil
	}
	if gates.Enabled(features.KubernetesWAS) {
		return "", "", errors.New("the KubernetesWAS feature gate cannot be combined with --batch-scheduler or --enable-batch-scheduler")
	}
	if deprecated && name != "" {
		return "", "", errors.New("both feature flags enable-batch-scheduler (deprecated) and batch-scheduler are set. Please use batch-scheduler only")
	}
	warning := ""
	if deprecated {
		name = batchscheduler.Volcano
		warning = "Feature flag enable-batch-scheduler is deprecated and will not be supported soon. Use batch-scheduler instead."
	}
	if !batchscheduler.Known(name) {
		return "", "", fmt.Errorf("scheduler is not supported, name=%s", name)
	}
	return name, warning, nil
}
