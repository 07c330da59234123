package install

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/spec"
	"github.com/kray-project/kray/pkg/validation"
)

// Every RayCluster in config/samples decodes without unknown fields and passes kray's validation (KubeRay's
// rules), and each sample shows what its name promises. The CRD's admission of the same files is checked
// by test/integration (TestSamplesPassServerSideDryRun).
func TestSamplesAcceptedByKray(t *testing.T) {
	checks := map[string]func(t *testing.T, rc *rayv1.RayCluster){
		"ray-cluster.sample.yaml": func(t *testing.T, rc *rayv1.RayCluster) {
			if spec.AutoscalingEnabled(rc) || len(rc.Spec.WorkerGroupSpecs) != 1 {
				t.Errorf("the minimal sample should have one group and no autoscaling")
			}
		},
		"ray-cluster.autoscaler.yaml": func(t *testing.T, rc *rayv1.RayCluster) {
			if !spec.AutoscalingEnabled(rc) || spec.AutoscalerV2(rc) {
				t.Errorf("want autoscaling with autoscaler v1")
			}
		},
		"ray-cluster.autoscaler-v2.yaml": func(t *testing.T, rc *rayv1.RayCluster) {
			if !spec.AutoscalingEnabled(rc) || !spec.AutoscalerV2(rc) {
				t.Errorf("want autoscaling with autoscaler v2")
			}
			if o := rc.Spec.AutoscalerOptions; o == nil || o.Version == nil || *o.Version != rayv1.AutoscalerVersionV2 {
				t.Errorf("want autoscalerOptions.version v2")
			}
			for _, e := range rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Env {
				if strings.EqualFold(e.Name, constants.EnvAutoscalerV2) {
					t.Errorf("the head sets %s; the version comes from autoscalerOptions.version", e.Name)
				}
			}
			for i := range rc.Spec.WorkerGroupSpecs {
				g := &rc.Spec.WorkerGroupSpecs[i]
				if g.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
					t.Errorf("worker group %s restartPolicy %q, want Never", g.GroupName, g.Template.Spec.RestartPolicy)
				}
				// What the sample's comment promises: Always for Kruise, Never remembered for kray.
				tmpl := builder.WorkerCloneSet(rc, g, builder.Options{}, false).Spec.Template
				if tmpl.Spec.RestartPolicy != corev1.RestartPolicyAlways || tmpl.Annotations[constants.AnnotationRestartPolicy] != string(corev1.RestartPolicyNever) {
					t.Errorf("worker group %s renders restartPolicy %s with annotation %q", g.GroupName, tmpl.Spec.RestartPolicy, tmpl.Annotations[constants.AnnotationRestartPolicy])
				}
			}
		},
		"ray-cluster.multi-group.yaml": func(t *testing.T, rc *rayv1.RayCluster) {
			if len(rc.Spec.WorkerGroupSpecs) < 2 {
				t.Errorf("want several worker groups, got %d", len(rc.Spec.WorkerGroupSpecs))
			}
			seen := map[string]bool{}
			for i := range rc.Spec.WorkerGroupSpecs {
				name := builder.WorkerCloneSet(rc, &rc.Spec.WorkerGroupSpecs[i], builder.Options{}, false).Name
				if seen[name] {
					t.Errorf("two groups share CloneSet %s", name)
				}
				seen[name] = true
			}
		},
		"ray-cluster.rolling-update.yaml": func(t *testing.T, rc *rayv1.RayCluster) {
			if !spec.Rolling(rc) || rc.Spec.WorkerDrain == nil {
				t.Fatalf("want upgradeStrategy RollingUpdate and workerDrain")
			}
			cs := builder.WorkerCloneSet(rc, &rc.Spec.WorkerGroupSpecs[0], builder.Options{}, false)
			if cs.Spec.UpdateStrategy.Type != "InPlaceIfPossible" || cs.Spec.Lifecycle == nil || cs.Spec.Lifecycle.PreDelete == nil {
				t.Errorf("CloneSet strategy %s, lifecycle %+v: want InPlaceIfPossible and a preDelete hook", cs.Spec.UpdateStrategy.Type, cs.Spec.Lifecycle)
			}
		},
		"ray-cluster.suspended.yaml": func(t *testing.T, rc *rayv1.RayCluster) {
			if !spec.ClusterSuspended(rc) {
				t.Errorf("want spec.suspend true")
			}
			if n := *builder.HeadStatefulSet(rc, builder.Options{}).Spec.Replicas; n != 0 {
				t.Errorf("head StatefulSet replicas %d, want 0", n)
			}
			for i := range rc.Spec.WorkerGroupSpecs {
				if n := *builder.WorkerCloneSet(rc, &rc.Spec.WorkerGroupSpecs[i], builder.Options{}, false).Spec.Replicas; n != 0 {
					t.Errorf("worker CloneSet replicas %d, want 0", n)
				}
			}
		},
	}
	files, err := filepath.Glob(filepath.Join(configDir, "samples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, file := range files {
		name := filepath.Base(file)
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			rc := &rayv1.RayCluster{}
			if err := yaml.UnmarshalStrict(data, rc); err != nil {
				t.Fatalf("not a single RayCluster without unknown fields: %v", err)
			}
			if rc.APIVersion != "ray.io/v1" || rc.Kind != "RayCluster" {
				t.Fatalf("%s %s, want ray.io/v1 RayCluster", rc.APIVersion, rc.Kind)
			}
			if err := validation.Metadata(rc); err != nil {
				t.Errorf("metadata rejected: %v", err)
			}
			if err := validation.Spec(rc); err != nil {
				t.Errorf("spec rejected: %v", err)
			}
			if check := checks[name]; check != nil {
				check(t, rc)
			} else {
				t.Errorf("no check for this sample: add one to TestSamplesAcceptedByKray")
			}
		})
	}
	for name := range checks {
		if !seen[name] {
			t.Errorf("config/samples/%s is missing", name)
		}
	}
}
