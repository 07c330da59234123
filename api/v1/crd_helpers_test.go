package v1_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/yaml"

	"github.com/kray-project/kray/internal/kuberayref"
	"github.com/kray-project/kray/internal/moddir"
)

const (
	// kubeRayModule and kubeRayVersion pin the newest KubeRay release the Go module proxy serves: its Go API
	// is compared with kray's, and its CRDs and samples are one of kubeRayRefs.
	kubeRayModule  = "github.com/ray-project/kuberay/ray-operator"
	kubeRayVersion = "v1.6.1"
	// rayClusterCRDPath, rayJobCRDPath, rayServiceCRDPath and rayCronJobCRDPath are the CRDs' paths inside
	// this repository; their base names are those of KubeRay's CRDs.
	rayClusterCRDPath = "config/crd/bases/ray.io_rayclusters.yaml"
	rayJobCRDPath     = "config/crd/bases/ray.io_rayjobs.yaml"
	rayServiceCRDPath = "config/crd/bases/ray.io_rayservices.yaml"
	rayCronJobCRDPath = "config/crd/bases/ray.io_raycronjobs.yaml"
)

// kubeRayRef is a KubeRay release whose CRDs and samples kray must accept.
type kubeRayRef struct {
	version string
	// crds and samples are the directories of its CRDs and of its sample manifests.
	crds, samples string
}

// kubeRayRefs are the KubeRay releases kray is compared with: the newest module the proxy serves
// (kubeRayVersion) and v1.7.0, kept as reference data (kuberayref).
func kubeRayRefs(t *testing.T) []kubeRayRef {
	t.Helper()
	ref, err := kuberayref.Dir()
	if err != nil {
		t.Fatal(err)
	}
	mod := kubeRayDir(t)
	return []kubeRayRef{
		{kubeRayVersion, filepath.Join(mod, "config", "crd", "bases"), filepath.Join(mod, "config", "samples")},
		{kuberayref.Version, filepath.Join(ref, kuberayref.CRDDir), filepath.Join(ref, kuberayref.SamplesDir)},
	}
}

// newestKubeRay is the newest of kubeRayRefs.
func newestKubeRay(t *testing.T) kubeRayRef {
	refs := kubeRayRefs(t)
	return refs[len(refs)-1]
}

// kubeRayDir returns the directory of KubeRay's ray-operator module, downloading it if needed.
func kubeRayDir(t *testing.T) string {
	t.Helper()
	dir, err := moddir.Dir(kubeRayModule, kubeRayVersion)
	if err != nil {
		t.Fatalf("locating KubeRay %s: %v", kubeRayVersion, err)
	}
	return dir
}

// readCRD parses the CRD at path.
func readCRD(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	return crd
}

// ourCRD returns kray's generated RayCluster CRD.
func ourCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	return ourCRDAt(t, rayClusterCRDPath)
}

// kubeRayCRD returns the newest KubeRay's RayCluster CRD.
func kubeRayCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	return newestKubeRay(t).crd(t, rayClusterCRDPath)
}

// ourCRDAt returns kray's generated CRD at path.
func ourCRDAt(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	return readCRD(t, filepath.Join("..", "..", path))
}

// crd returns the release's CRD of the base name of path.
func (r kubeRayRef) crd(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	return readCRD(t, filepath.Join(r.crds, filepath.Base(path)))
}

// crdVersion returns the named version of crd and fails the test if it has none.
func crdVersion(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, name string) *apiextensionsv1.CustomResourceDefinitionVersion {
	t.Helper()
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == name {
			return &crd.Spec.Versions[i]
		}
	}
	t.Fatalf("CRD %s has no version %s", crd.Name, name)
	return nil
}

// v1Schema returns the openAPIV3Schema of crd's v1 version.
func v1Schema(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	v := crdVersion(t, crd, "v1")
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		t.Fatalf("CRD %s v1 has no schema", crd.Name)
	}
	return v.Schema.OpenAPIV3Schema
}

// schemaPaths flattens a schema into its property paths: ".a.b" for properties, "[]" for array items and
// "{}" for map values. The root is "".
func schemaPaths(s *apiextensionsv1.JSONSchemaProps) map[string]*apiextensionsv1.JSONSchemaProps {
	paths := map[string]*apiextensionsv1.JSONSchemaProps{}
	var walk func(path string, s *apiextensionsv1.JSONSchemaProps)
	walk = func(path string, s *apiextensionsv1.JSONSchemaProps) {
		paths[path] = s
		for name := range s.Properties {
			p := s.Properties[name]
			walk(path+"."+name, &p)
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(path+"[]", s.Items.Schema)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			walk(path+"{}", s.AdditionalProperties.Schema)
		}
	}
	walk("", s)
	return paths
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// crValidator runs the apiserver's admission pipeline for a custom resource of one CRD version without an
// apiserver: prune unknown fields, apply defaults, validate the OpenAPI schema, evaluate the CEL rules.
type crValidator struct {
	structural *structuralschema.Structural
	schema     apiextensionsvalidation.SchemaValidator
	cel        *cel.Validator
}

// newCRValidator builds a crValidator for the v1 schema of crd.
func newCRValidator(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *crValidator {
	t.Helper()
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1Schema(t, crd), internal, nil); err != nil {
		t.Fatal(err)
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Fatal(err)
	}
	schemaValidator, _, err := apiextensionsvalidation.NewSchemaValidator(internal)
	if err != nil {
		t.Fatal(err)
	}
	return &crValidator{
		structural: structural,
		schema:     schemaValidator,
		cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}
}

// normalize prunes and defaults a copy of obj as the apiserver does on decoding; it does not modify obj.
func (v *crValidator) normalize(obj map[string]any) map[string]any {
	out := runtime.DeepCopyJSON(obj)
	structuralpruning.Prune(out, v.structural, true)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(out, v.structural)
	structuraldefaulting.Default(out, v.structural)
	return out
}

// prune returns a copy of obj without the fields that the schema does not know; it does not modify obj.
func (v *crValidator) prune(obj map[string]any) map[string]any {
	out := runtime.DeepCopyJSON(obj)
	structuralpruning.Prune(out, v.structural, true)
	return out
}

// admit returns the errors that the apiserver would report for creating obj (old == nil) or for updating
// old to obj.
func (v *crValidator) admit(obj, old map[string]any) field.ErrorList {
	newObj := v.normalize(obj)
	var errs field.ErrorList
	var oldObj any
	if old == nil {
		generateName(newObj)
		errs = apiextensionsvalidation.ValidateCustomResource(nil, newObj, v.schema)
	} else {
		normalizedOld := v.normalize(old)
		oldObj = normalizedOld
		errs = apiextensionsvalidation.ValidateCustomResourceUpdate(nil, newObj, normalizedOld, v.schema)
	}
	celErrs, _ := v.cel.Validate(context.Background(), nil, v.structural, newObj, oldObj, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// generateName sets metadata.name from metadata.generateName as the apiserver does before validating a create.
func generateName(obj map[string]any) {
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil || meta["name"] != nil {
		return
	}
	if base, ok := meta["generateName"].(string); ok && base != "" {
		meta["name"] = names.SimpleNameGenerator.GenerateName(base)
	}
}

// decodeYAMLDocuments decodes every document of a YAML stream into JSON-compatible maps, with integers as
// int64 like the apiserver's decoder.
func decodeYAMLDocuments(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var docs []map[string]any
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		docs = append(docs, decodeYAML(t, string(doc)))
	}
}

// decodeYAML decodes one YAML document into a JSON-compatible map, with integers as int64.
func decodeYAML(t *testing.T, doc string) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(j, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// errorStrings renders errs one per element for matching and for messages.
func errorStrings(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// containsAll reports whether every want is a substring of some element of got.
func containsAll(got []string, want []string) bool {
	joined := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			return false
		}
	}
	return true
}
