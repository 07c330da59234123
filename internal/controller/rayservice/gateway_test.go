package rayservice

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files from the builders' output")

// The Gateway, HTTPRoute and per-cluster serve Service of an incremental upgrade, as KubeRay v1.7 shapes
// them, for a RayService mid-way between two clusters.
func TestIncrementalObjectsGolden(t *testing.T) {
	svc := service(stepwise(50, 25, 10))
	old, next := Cluster(svc, "svc-old"), Cluster(svc, "svc-new")
	old.UID, next.UID = "old-uid", "new-uid"
	var out []byte
	for _, obj := range []any{Gateway(svc), HTTPRoute(svc, Backend{old, 75}, Backend{next, 25}), ClusterServeService(svc, next)} {
		data, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		out = append(append(out, "---\n"...), data...)
	}
	path := filepath.Join("testdata", "incremental-objects.yaml")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/controller/rayservice -update)", err)
	}
	if string(want) != string(out) {
		t.Errorf("incremental upgrade objects differ from %s (run with -update if intended):\n%s", path, out)
	}
}
