// Command crdbounds adds the int32 range (minimum -2147483648, maximum 2147483647) to every integer
// property of format int32 in CRD files, where the schema sets no bound of its own.
//
// The API server does not enforce `format: int32`, so without bounds it stores a RayCluster whose replicas
// (or a pod template's containerPort) is 2^40; every typed client then fails to decode the whole
// RayCluster list, which stops an operator's informer for all clusters. `make manifests` runs this after
// controller-gen.
//
// Usage: go run ./hack/crdbounds FILE...
package main

import (
	"fmt"
	"math"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	for _, path := range os.Args[1:] {
		if err := bound(path); err != nil {
			fmt.Fprintf(os.Stderr, "crdbounds: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

func bound(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return err
	}
	for i := range crd.Spec.Versions {
		if s := crd.Spec.Versions[i].Schema; s != nil && s.OpenAPIV3Schema != nil {
			walk(s.OpenAPIV3Schema)
		}
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}

// walk bounds s and every schema nested in it.
func walk(s *apiextensionsv1.JSONSchemaProps) {
	if s.Type == "integer" && s.Format == "int32" {
		if s.Minimum == nil {
			lo := float64(math.MinInt32)
			s.Minimum = &lo
		}
		if s.Maximum == nil {
			hi := float64(math.MaxInt32)
			s.Maximum = &hi
		}
	}
	for k, p := range s.Properties {
		walk(&p)
		s.Properties[k] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		walk(s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walk(s.AdditionalProperties.Schema)
	}
}
