package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/internal/kuberayref"
	"github.com/kray-project/kray/internal/moddir"
)

// Every ray.io/v1 manifest (RayCluster, RayJob, RayService, RayCronJob) shipped in the config/samples of
// KubeRay v1.6.1 (the newest module the proxy serves) and v1.7.0 (reference data), and every one in kray's
// own config/samples, is accepted by kray's CRDs in a server-side dry run (what `kubectl apply
// --dry-run=server` does).
func TestSamplesPassServerSideDryRun(t *testing.T) {
	dir, err := moddir.Dir("github.com/ray-project/kuberay/ray-operator", "v1.6.1")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := kuberayref.Path(kuberayref.SamplesDir)
	if err != nil {
		t.Fatal(err)
	}
	v161, _ := filepath.Glob(filepath.Join(dir, "config", "samples", "*.yaml"))
	v170, _ := filepath.Glob(filepath.Join(ref, "*.yaml"))
	ours, _ := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*.yaml"))
	kuberay := append(v161, v170...)
	ns := newNamespace(t)
	seen := map[string]int{}
	for _, file := range append(kuberay, ours...) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: %v", file, err)
			}
			if obj.GetAPIVersion() != "ray.io/v1" {
				continue
			}
			seen[obj.GetKind()]++
			obj.SetNamespace(ns)
			if err := k8s.Create(context.Background(), obj, client.DryRunAll); err != nil {
				t.Errorf("%s: %s %s rejected: %v", filepath.Base(file), obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	for kind, least := range map[string]int{"RayCluster": 40, "RayJob": 30, "RayService": 24, "RayCronJob": 2} {
		if seen[kind] < least {
			t.Errorf("only %d %s manifests found, want at least %d; the samples' layout may have changed", seen[kind], kind, least)
		}
	}
	t.Logf("manifests accepted: %v", seen)
}
