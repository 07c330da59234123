package builder_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files from the builders' output")

// TestGolden renders every object kray builds for each testdata/*.input.yaml and compares the result with
// testdata/*.golden.yaml. Run `go test ./pkg/builder -update` to rewrite them, then review the diff.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.input.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".input.yaml")
		t.Run(name, func(t *testing.T) {
			rc := load(t, in)
			got := render(t, rc)
			golden := filepath.Join("testdata", name+".golden.yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run with -update to create it): %v", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Fatalf("builders' output differs from %s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

// TestBuildersDoNotModifyInput guards the builders' contract: the RayCluster they read is unchanged.
func TestBuildersDoNotModifyInput(t *testing.T) {
	inputs, _ := filepath.Glob("testdata/*.input.yaml")
	for _, in := range inputs {
		rc := load(t, in)
		before := rc.DeepCopy()
		render(t, rc)
		if diff := cmp.Diff(before, rc); diff != "" {
			t.Fatalf("%s: builders modified their input:\n%s", in, diff)
		}
	}
}

func load(t *testing.T, path string) *rayv1.RayCluster {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rc := &rayv1.RayCluster{}
	if err := yaml.UnmarshalStrict(data, rc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rc
}

func render(t *testing.T, rc *rayv1.RayCluster) []byte {
	t.Helper()
	opts := builder.Options{Version: "v0.0.0-golden"}
	objs := []any{builder.HeadService(rc, opts), builder.HeadStatefulSet(rc, opts)}
	for i := range rc.Spec.WorkerGroupSpecs {
		objs = append(objs, builder.WorkerCloneSet(rc, &rc.Spec.WorkerGroupSpecs[i], opts, false))
	}
	if spec.AutoscalingEnabled(rc) {
		objs = append(objs, builder.AutoscalerServiceAccount(rc), builder.AutoscalerRole(rc), builder.AutoscalerRoleBinding(rc))
	}
	if s := builder.AuthSecret(rc, "golden-token"); s != nil {
		objs = append(objs, s)
	}
	if pvc := builder.GCSStoragePVC(rc); pvc != nil {
		objs = append(objs, pvc)
	}
	if ing := builder.HeadIngress(rc, opts); ing != nil {
		objs = append(objs, ing)
	}
	if svc := builder.ServeService(rc); svc != nil {
		objs = append(objs, svc)
	}
	for _, np := range builder.NetworkPolicies(rc, opts) {
		objs = append(objs, np)
	}
	for _, obj := range builder.TLSObjects(rc, opts, []string{"10.0.0.10"}, []string{"10.0.1.11", "10.0.1.12"}) {
		objs = append(objs, obj.Object)
	}
	if spec.FTRedis(rc) {
		objs = append(objs, builder.RedisCleanupJob(rc, opts))
	}
	var buf bytes.Buffer
	for _, o := range objs {
		out, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(out)
	}
	return buf.Bytes()
}
