// Package install renders kray's installation manifests, the kustomize tree under config/ and the Helm chart
// under charts/kray, into objects. Its tests check them offline (make test-unit); test/e2e dry-runs them
// against a live cluster. Neither the kustomize nor the helm binary is needed.
package install

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Kustomize builds the kustomization in dir, as `kubectl kustomize dir` does, and returns its objects in
// apply order.
func Kustomize(dir string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	objs, err := Decode(out)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	SortForApply(objs)
	return objs, nil
}

// Release names a Helm release for HelmChart.
type Release struct {
	Name      string
	Namespace string
}

// HelmChart renders the chart in dir with values over its defaults, as `helm template --include-crds` does
// for a first install, and returns the CRDs from crds/ and the rendered templates' objects in apply order.
// Templates are rendered strictly: a reference to a value the chart does not define is an error.
func HelmChart(dir string, rel Release, values map[string]any) ([]*unstructured.Unstructured, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{
		Name: rel.Name, Namespace: rel.Namespace, Revision: 1, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("values for chart %s: %w", dir, err)
	}
	rendered, err := engine.Engine{Strict: true}.Render(ch, vals)
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, crd := range ch.CRDObjects() {
		got, err := Decode(crd.File.Data)
		if err != nil {
			return nil, fmt.Errorf("chart %s: %s: %w", dir, crd.Filename, err)
		}
		objs = append(objs, got...)
	}
	files := make([]string, 0, len(rendered))
	for name := range rendered {
		files = append(files, name)
	}
	sort.Strings(files)
	for _, name := range files {
		if strings.HasSuffix(name, "NOTES.txt") || strings.HasPrefix(filepath.Base(name), "_") {
			continue
		}
		got, err := Decode([]byte(rendered[name]))
		if err != nil {
			return nil, fmt.Errorf("chart %s: %s: %w", dir, name, err)
		}
		objs = append(objs, got...)
	}
	SortForApply(objs)
	return objs, nil
}

// Decode reads every object of a multi-document YAML (or JSON) stream, skipping empty documents.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(obj.Object) == 0 {
			continue
		}
		if obj.GetKind() == "" || obj.GetAPIVersion() == "" {
			return nil, fmt.Errorf("object without apiVersion or kind: %v", obj.Object)
		}
		out = append(out, obj)
	}
}

// applyOrder ranks kinds so that what an object depends on is applied before it (Helm's install order).
var applyOrder = []string{
	"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
	"Role", "RoleBinding", "ConfigMap", "Secret", "Service", "Deployment",
}

// SortForApply orders objs by applyOrder; unknown kinds go last. The sort is stable.
func SortForApply(objs []*unstructured.Unstructured) {
	rank := func(kind string) int {
		for i, k := range applyOrder {
			if k == kind {
				return i
			}
		}
		return len(applyOrder)
	}
	sort.SliceStable(objs, func(i, j int) bool { return rank(objs[i].GetKind()) < rank(objs[j].GetKind()) })
}

// Find returns the only object of kind in objs, or nil when there is none; more than one is an error.
func Find(objs []*unstructured.Unstructured, kind string) (*unstructured.Unstructured, error) {
	var found *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() != kind {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("more than one %s: %s and %s", kind, found.GetName(), o.GetName())
		}
		found = o
	}
	return found, nil
}
