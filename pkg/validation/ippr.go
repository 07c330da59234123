package validation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/spec"
)

// ippr field names in a group of the ray.io/ippr annotation, as Ray's autoscaler v2 reads them.
const (
	ipprMaxCPU        = "max-cpu"
	ipprMaxMemory     = "max-memory"
	ipprResizeTimeout = "resize-timeout"
)

// IPPRWarnings checks the ray.io/ippr annotation as Ray's autoscaler v2 does before it resizes a group's pods in
// place, with Ray's words where Ray has them. KubeRay admits such clusters and so does kray: the autoscaler,
// not the operator, refuses a misconfigured group, so each problem is a warning that says so.
func IPPRWarnings(rc *rayv1.RayCluster) []Warning {
	raw, ok := rc.Annotations[constants.AnnotationIPPR]
	if !ok {
		return nil
	}
	warn := func(format string, args ...any) Warning {
		return Warning{EventInvalidIPPRSpec, fmt.Sprintf("annotation %s: ", constants.AnnotationIPPR) + fmt.Sprintf(format, args...) +
			"; Ray's autoscaler does not resize such a group in place (its log in the head pod says why)"}
	}
	var doc struct {
		Groups map[string]json.RawMessage `json:"groups"`
	}
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		return []Warning{warn(`not a JSON object of the form {"groups": {"<group>": {"max-cpu": ..., "max-memory": ..., "resize-timeout": ...}}}: %v`, err)}
	}
	var out []Warning
	if !spec.AutoscalingEnabled(rc) || !spec.AutoscalerV2(rc) {
		out = append(out, warn("in-place pod resize is done by Ray's autoscaler v2: set enableInTreeAutoscaling and autoscalerOptions.version v2"))
	}
	names := make([]string, 0, len(doc.Groups))
	for name := range doc.Groups {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if problem := ipprGroupLimits(doc.Groups[name]); problem != "" {
			out = append(out, warn("group %s: %s", name, problem))
			continue
		}
		tmpl, params, ok := ipprGroupSpec(rc, name)
		if !ok {
			out = append(out, Warning{EventInvalidIPPRSpec, fmt.Sprintf("annotation %s: group %s is not a group of this cluster (%s or a worker group's name); Ray's autoscaler ignores it", constants.AnnotationIPPR, name, constants.HeadGroupName)})
			continue
		}
		for _, problem := range ipprGroupTemplate(tmpl, params) {
			out = append(out, warn("group %s: %s", name, problem))
		}
	}
	return out
}

// ipprGroupLimits checks one group's entry: the three fields present, the maxima Kubernetes quantities (a
// string or a number) and the timeout a whole number of seconds. It returns the first problem, or "".
func ipprGroupLimits(raw json.RawMessage) string {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return "not a JSON object"
	}
	for _, key := range []string{ipprMaxCPU, ipprMaxMemory, ipprResizeTimeout} {
		if _, ok := fields[key]; !ok {
			return fmt.Sprintf("%q is required", key)
		}
	}
	for _, key := range []string{ipprMaxCPU, ipprMaxMemory} {
		if err := ipprQuantity(fields[key], key == ipprMaxMemory); err != nil {
			return fmt.Sprintf("%q: %v", key, err)
		}
	}
	if n, ok := ipprNumber(fields[ipprResizeTimeout]); !ok || !wholeNumber(n) {
		return fmt.Sprintf("%q must be a whole number of seconds", ipprResizeTimeout)
	}
	return ""
}

// ipprQuantity checks a maximum: a quantity string, or a number (a whole number for memory, in bytes).
func ipprQuantity(raw json.RawMessage, integer bool) error {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if _, err := resource.ParseQuantity(s); err != nil {
			return fmt.Errorf("%q is not a Kubernetes quantity", s)
		}
		return nil
	}
	n, ok := ipprNumber(raw)
	if !ok {
		return fmt.Errorf("must be a quantity string or a number")
	}
	if integer && !wholeNumber(n) {
		return fmt.Errorf("must be a quantity string or a whole number of bytes")
	}
	return nil
}

// wholeNumber reports whether n is an integer.
func wholeNumber(n json.Number) bool {
	_, err := n.Int64()
	return err == nil
}

// ipprNumber decodes raw as a JSON number, not a string that holds one.
func ipprNumber(raw json.RawMessage) (json.Number, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", false
	}
	n, ok := v.(json.Number)
	return n, ok
}

// ipprGroupSpec returns the template and rayStartParams of the group the annotation names: the head's under
// constants.HeadGroupName, else the worker group of that name.
func ipprGroupSpec(rc *rayv1.RayCluster, name string) (*corev1.PodTemplateSpec, map[string]string, bool) {
	if name == constants.HeadGroupName {
		return &rc.Spec.HeadGroupSpec.Template, rc.Spec.HeadGroupSpec.RayStartParams, true
	}
	for i := range rc.Spec.WorkerGroupSpecs {
		if g := &rc.Spec.WorkerGroupSpecs[i]; g.GroupName == name {
			return &g.Template, g.RayStartParams, true
		}
	}
	return nil, nil, false
}

// ipprGroupTemplate checks what Ray's autoscaler checks of a resizable group, in Ray's words: Ray's CPU and
// memory come from the pod, the Ray container requests both (the lower bounds of a resize), and no resize of
// them restarts the container.
func ipprGroupTemplate(tmpl *corev1.PodTemplateSpec, params map[string]string) []string {
	var out []string
	if _, cpus := params["num-cpus"]; cpus {
		out = append(out, "should not have 'num-cpus' or 'memory' in rayStartParams if IPPR is used")
	} else if _, mem := params["memory"]; mem {
		out = append(out, "should not have 'num-cpus' or 'memory' in rayStartParams if IPPR is used")
	}
	if len(tmpl.Spec.Containers) == 0 {
		return out
	}
	ray := tmpl.Spec.Containers[constants.RayContainerIndex]
	_, cpu := ray.Resources.Requests[corev1.ResourceCPU]
	_, mem := ray.Resources.Requests[corev1.ResourceMemory]
	if !cpu || !mem {
		out = append(out, "should have 'cpu' and 'memory' in resource requests as the resources lower bounds if IPPR is used")
	}
	if slices.ContainsFunc(ray.ResizePolicy, func(p corev1.ContainerResizePolicy) bool {
		return (p.ResourceName == corev1.ResourceCPU || p.ResourceName == corev1.ResourceMemory) &&
			p.RestartPolicy != corev1.NotRequired
	}) {
		out = append(out, "IPPR only supports restartPolicy=NotRequired")
	}
	return out
}
