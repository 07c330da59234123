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

	"github.com/kray-project/kray/internal/moddir"
)

// Every RayCluster manifest shipped in KubeRay v1.5.0's config/samples, and every one in kray's own
// config/samples, is accepted by kray's CRD in a server-side dry run (what `kubectl apply --dry-run=server`
// does).
func TestSamplesPassServerSideDryRun(t *testing.T) {
	dir, err := moddir.Dir("github.com/ray-project/kuberay/ray-operator", "v1.5.0")
	if err != nil {
		t.Fatal(err)
	}
	kuberay, _ := filepath.Glob(filepath.Join(dir, "config", "samples", "*.yaml"))
	ours, _ := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*.yaml"))
	ns := newNamespace(t)
	seen := 0
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
			if obj.GetAPIVersion() != "ray.io/v1" || obj.GetKind() != "RayCluster" {
				continue
			}
			seen++
			obj.SetNamespace(ns)
			if err := k8s.Create(context.Background(), obj, client.DryRunAll); err != nil {
				t.Errorf("%s: RayCluster %s rejected: %v", filepath.Base(file), obj.GetName(), err)
			}
		}
	}
	if seen < 20 {
		t.Fatalf("only %d RayCluster manifests found; the samples' layout may have changed", seen)
	}
	t.Logf("%d RayCluster manifests accepted", seen)
}
