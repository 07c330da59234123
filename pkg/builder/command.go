package builder

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ulimitCommand raises the open-file limit of `ray start` and its children, overridable from the pod's env.
const ulimitCommand = "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}"

// flagsWithExplicitFalse are the ray start flags whose "false" is a value, not an absent switch.
var flagsWithExplicitFalse = map[string]bool{"log-color": true, "include-dashboard": true, "include-log-monitor": true}

// rayStartCommand renders `ray start` from params, with KubeRay's spacing: sorted keys, each flag wrapped in
// single spaces, "true" as a bare switch and "false" as no flag at all.
func rayStartCommand(head bool, params map[string]string) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	if head {
		b.WriteString("ray start --head ")
	} else {
		b.WriteString("ray start ")
	}
	for _, k := range keys {
		v := params[k]
		lower := strings.ToLower(v)
		switch {
		case (lower == "true" || lower == "false") && !flagsWithExplicitFalse[k]:
			if lower == "true" {
				fmt.Fprintf(&b, " --%s ", k)
			}
		default:
			fmt.Fprintf(&b, " --%s=%s ", k, v)
		}
	}
	return b.String()
}

// addResourceParams fills num-cpus, memory, num-gpus and accelerator resources from the Ray container's
// resources when params does not set them already. It writes into params.
func addResourceParams(params map[string]string, res corev1.ResourceRequirements) {
	if _, ok := params["num-cpus"]; !ok {
		cpu := res.Limits[corev1.ResourceCPU]
		if cpu.IsZero() {
			cpu = res.Requests[corev1.ResourceCPU]
		}
		if !cpu.IsZero() {
			params["num-cpus"] = strconv.FormatInt(cpu.Value(), 10)
		}
	}
	if _, ok := params["memory"]; !ok {
		if mem := res.Limits[corev1.ResourceMemory]; !mem.IsZero() {
			params["memory"] = strconv.FormatInt(mem.Value(), 10)
		}
	}
	names := make([]string, 0, len(res.Limits))
	for n := range res.Limits {
		names = append(names, string(n))
	}
	sort.Strings(names)
	gpuSet := false
	if _, ok := params["num-gpus"]; !ok {
		for _, n := range names {
			q := res.Limits[corev1.ResourceName(n)]
			if isGPU(n) && !q.IsZero() {
				params["num-gpus"] = strconv.FormatInt(q.Value(), 10)
				gpuSet = true
				break
			}
		}
	} else {
		gpuSet = true
	}
	if gpuSet {
		return
	}
	addCustomAccelerator(params, res.Limits)
}

// customAccelerators maps Kubernetes extended resources to the Ray resource names KubeRay advertises for them.
var customAccelerators = []struct{ k8s, ray string }{
	{"google.com/tpu", "TPU"},
	{"aws.amazon.com/neuroncore", "neuron_cores"},
}

func addCustomAccelerator(params map[string]string, limits corev1.ResourceList) {
	for _, acc := range customAccelerators {
		q, ok := limits[corev1.ResourceName(acc.k8s)]
		if !ok || q.IsZero() {
			continue
		}
		custom := map[string]float64{}
		if existing, ok := params["resources"]; ok {
			if err := json.Unmarshal([]byte(strings.Trim(existing, "'\"")), &custom); err != nil {
				return // an unparsable user value is left exactly as written
			}
		}
		if _, ok := custom[acc.ray]; ok {
			return
		}
		custom[acc.ray] = float64(q.Value())
		params["resources"] = "'" + mustJSON(custom) + "'"
		return
	}
}

// isGPU reports whether a resource name counts as a GPU for Ray: a name ending in "gpu" or a MIG profile.
func isGPU(name string) bool {
	return strings.HasSuffix(name, "gpu") || strings.HasPrefix(name, "nvidia.com/mig-")
}

// applyGroupResources moves a group's `resources` map into ray start params (cpu, memory, *gpu as integers,
// everything else into the JSON resources map). Validation guarantees params has none of those keys yet.
func applyGroupResources(params map[string]string, groupResources map[string]string) {
	if len(groupResources) == 0 {
		return
	}
	custom := map[string]float64{}
	for name, value := range groupResources {
		q, err := resource.ParseQuantity(value)
		if err != nil {
			continue // validation reports unparsable quantities before builders run
		}
		switch {
		case name == "cpu":
			params["num-cpus"] = strconv.FormatInt(q.Value(), 10)
		case name == "memory":
			params["memory"] = strconv.FormatInt(q.Value(), 10)
		case isGPU(strings.ToLower(name)):
			params["num-gpus"] = strconv.FormatInt(q.Value(), 10)
		default:
			custom[name] = q.AsApproximateFloat64()
		}
	}
	if len(custom) > 0 {
		params["resources"] = "'" + mustJSON(custom) + "'"
	}
}

// applyGroupLabels renders a group's Ray node labels as the `labels` ray start param, sorted by key.
func applyGroupLabels(params map[string]string, labels map[string]string) {
	if len(labels) == 0 {
		return
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, 0, len(keys))
	for _, k := range keys {
		pairs = append(pairs, k+"="+labels[k])
	}
	params["labels"] = strings.Join(pairs, ",")
}

// mustJSON marshals a map of floats, which cannot fail; json.Marshal sorts map keys.
func mustJSON(v map[string]float64) string {
	out, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(out)
}

// containerCommand returns the Ray container's command and args after KubeRay's rewrite: the user's own
// command runs first, then `ulimit; ray start`. It returns ok=false when the command must be left alone.
func containerCommand(c corev1.Container, startCmd string, overwrite, login bool) (command, args []string, ok bool) {
	var user string
	for _, part := range c.Command {
		user += " " + part + " "
	}
	for _, part := range c.Args {
		user += " " + part + " "
	}
	if overwrite || strings.Contains(user, "ray start") {
		return nil, nil, false
	}
	generated := ulimitCommand + "; " + startCmd
	if user != "" {
		generated = user + " && " + generated
	}
	shell := "-c"
	if login {
		shell = "-lc"
	}
	return []string{"/bin/bash", shell, "--"}, []string{generated}, true
}
