package spec

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

// kray's extension settings (spec.workerDrain, spec.workerGroupSpecs[].rollingUpdate, and
// spec.upgradeStrategy, whose RollingUpdate type is kray's and which KubeRay's types before v1.6 lack) are
// fields that a client holding KubeRay's types may not have, so a client that reads a RayCluster with those
// types and writes it back (a typed Update, or Kueue's JSON merge patch of workerGroupSpecs) drops them. kray therefore keeps a copy of each
// in an annotation, which every such client preserves. The rule: a spec field, when set, is the setting (and
// kray copies it to the annotation); when it is absent, the annotation's copy is. Turning a setting off takes
// removing both.

// WithExtensions returns rc, or a copy whose absent extension fields are filled from kray's annotations.
func WithExtensions(rc *rayv1.RayCluster) (*rayv1.RayCluster, error) {
	drain, err := annotatedDrain(rc)
	if err != nil {
		return nil, err
	}
	rolling, err := annotatedRollingUpdates(rc)
	if err != nil {
		return nil, err
	}
	upgrade, err := annotatedUpgradeStrategy(rc)
	if err != nil {
		return nil, err
	}
	var out *rayv1.RayCluster
	copyOnce := func() {
		if out == nil {
			out = rc.DeepCopy()
		}
	}
	if rc.Spec.UpgradeStrategy == nil && upgrade != nil {
		copyOnce()
		out.Spec.UpgradeStrategy = upgrade
	}
	if rc.Spec.WorkerDrain == nil && drain != nil {
		copyOnce()
		out.Spec.WorkerDrain = drain
	}
	for i, g := range rc.Spec.WorkerGroupSpecs {
		if ru, ok := rolling[g.GroupName]; ok && g.RollingUpdate == nil {
			copyOnce()
			out.Spec.WorkerGroupSpecs[i].RollingUpdate = ru.DeepCopy()
		}
	}
	if out == nil {
		return rc, nil
	}
	return out, nil
}

// ExtensionAnnotations returns the values kray's annotations must hold for rc: each spec field that is set,
// each annotated setting whose field is absent, and no annotation where there is neither ("" removes it).
func ExtensionAnnotations(rc *rayv1.RayCluster) (map[string]string, error) {
	ext, err := WithExtensions(rc)
	if err != nil {
		return nil, err
	}
	out := map[string]string{constants.AnnotationWorkerDrain: "", constants.AnnotationRollingUpdate: "", constants.AnnotationUpgradeStrategy: ""}
	if u := ext.Spec.UpgradeStrategy; u != nil {
		b, err := json.Marshal(u)
		if err != nil {
			return nil, err
		}
		out[constants.AnnotationUpgradeStrategy] = string(b)
	}
	if d := ext.Spec.WorkerDrain; d != nil {
		b, err := json.Marshal(d)
		if err != nil {
			return nil, err
		}
		out[constants.AnnotationWorkerDrain] = string(b)
	}
	rolling := map[string]*rayv1.WorkerGroupRollingUpdate{}
	for _, g := range ext.Spec.WorkerGroupSpecs {
		if g.RollingUpdate != nil {
			rolling[g.GroupName] = g.RollingUpdate
		}
	}
	if len(rolling) > 0 {
		b, err := json.Marshal(rolling) // map keys are sorted, so equal settings give equal strings
		if err != nil {
			return nil, err
		}
		out[constants.AnnotationRollingUpdate] = string(b)
	}
	return out, nil
}

// ExtensionAnnotationsDiffer reports whether rc's annotations differ from want (as ExtensionAnnotations gives).
func ExtensionAnnotationsDiffer(rc *rayv1.RayCluster, want map[string]string) bool {
	have := map[string]string{}
	for k := range want {
		have[k] = rc.Annotations[k]
	}
	return !maps.Equal(have, want)
}

func annotatedDrain(rc *rayv1.RayCluster) (*rayv1.WorkerDrainOptions, error) {
	v, ok := rc.Annotations[constants.AnnotationWorkerDrain]
	if !ok || v == "" {
		return nil, nil
	}
	d := &rayv1.WorkerDrainOptions{}
	if err := strictJSON(v, d); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", constants.AnnotationWorkerDrain, err)
	}
	if t := d.TimeoutSeconds; t != nil && (*t < 1 || *t > constants.MaxDrainTimeoutSeconds) {
		return nil, fmt.Errorf("annotation %s: timeoutSeconds must be between 1 and %d, got %d", constants.AnnotationWorkerDrain, constants.MaxDrainTimeoutSeconds, *t)
	}
	return d, nil
}

func annotatedUpgradeStrategy(rc *rayv1.RayCluster) (*rayv1.RayClusterUpgradeStrategy, error) {
	v, ok := rc.Annotations[constants.AnnotationUpgradeStrategy]
	if !ok || v == "" {
		return nil, nil
	}
	u := &rayv1.RayClusterUpgradeStrategy{}
	if err := strictJSON(v, u); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", constants.AnnotationUpgradeStrategy, err)
	}
	if t := u.Type; t != nil && *t != rayv1.RayClusterRecreate && *t != rayv1.RayClusterUpgradeNone && *t != rayv1.RayClusterRollingUpdate {
		return nil, fmt.Errorf("annotation %s: type must be Recreate, None or RollingUpdate, got %q", constants.AnnotationUpgradeStrategy, *t)
	}
	return u, nil
}

func annotatedRollingUpdates(rc *rayv1.RayCluster) (map[string]*rayv1.WorkerGroupRollingUpdate, error) {
	v, ok := rc.Annotations[constants.AnnotationRollingUpdate]
	if !ok || v == "" {
		return nil, nil
	}
	m := map[string]*rayv1.WorkerGroupRollingUpdate{}
	if err := strictJSON(v, &m); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", constants.AnnotationRollingUpdate, err)
	}
	for g, ru := range m {
		if ru == nil {
			return nil, fmt.Errorf("annotation %s: group %q has no settings", constants.AnnotationRollingUpdate, g)
		}
	}
	return m, nil
}

// strictJSON decodes s into v, refusing unknown fields so that a misspelt setting is reported, not ignored.
func strictJSON(s string, v any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("not valid JSON of kray's settings: %w", err)
	}
	return nil
}
