package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/component-base/featuregate"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/features"
	"github.com/kray-project/kray/pkg/spec"
	"github.com/kray-project/kray/pkg/validation"
)

// Every object the builders make from the golden inputs and the samples passes Kubernetes' validation and
// the live Kruise webhooks (a server-side dry run), so the builders' output is not only pinned but accepted.
func TestBuiltObjectsPassLiveAdmission(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	var files []string
	for _, pattern := range []string{"pkg/builder/testdata/*.input.yaml", "config/samples/*.yaml"} {
		matches, _ := filepath.Glob(filepath.Join(repoRoot, pattern))
		files = append(files, matches...)
	}
	if len(files) < 4 {
		t.Fatalf("only %d inputs found", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			rc := &rayv1.RayCluster{}
			if err := yaml.UnmarshalStrict(data, rc); err != nil {
				t.Fatal(err)
			}
			rc.Namespace = ns
			rc.UID = "00000000-0000-4000-8000-000000000000"
			if err := validation.SpecWith(rc, validation.ClusterOptions{Gates: servedGates(t), CertManager: true}); err != nil {
				t.Fatalf("input is invalid: %v", err)
			}
			objs := []client.Object{builder.HeadService(rc, builder.Options{}), builder.HeadStatefulSet(rc, builder.Options{})}
			for i := range rc.Spec.WorkerGroupSpecs {
				objs = append(objs, builder.WorkerCloneSet(rc, &rc.Spec.WorkerGroupSpecs[i], builder.Options{}, false))
			}
			if spec.AutoscalingEnabled(rc) {
				objs = append(objs, builder.AutoscalerServiceAccount(rc), builder.AutoscalerRole(rc), builder.AutoscalerRoleBinding(rc))
			}
			for _, np := range builder.NetworkPolicies(rc, builder.Options{}) {
				objs = append(objs, np)
			}
			for _, obj := range builder.TLSObjects(rc, builder.Options{}, []string{"10.0.0.1"}, []string{"10.0.0.2"}) {
				objs = append(objs, obj)
			}
			for _, obj := range objs {
				if err := k8s.Create(context.Background(), obj, client.DryRunAll); err != nil {
					t.Errorf("%T %s rejected: %v", obj, obj.GetName(), err)
				}
			}
		})
	}
}

// servedGates are the feature gates with every alpha feature kray serves on, as the suite's operator runs
// (hack/e2e.sh).
func servedGates(t *testing.T) featuregate.FeatureGate {
	t.Helper()
	g := features.New()
	if err := (features.Flag{Gate: g}).Set("RayClusterNetworkPolicy=true,GCSFaultToleranceEmbeddedStorage=true,RayClusterHistoryServer=true,RayClusterMTLS=true"); err != nil {
		t.Fatal(err)
	}
	return g
}
