package v1_test

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// stricterThanKubeRay lists, per schema path, the constraints that kray's CRD adds on fields KubeRay also has;
// anything else added by accident fails TestSchemaParityWithKubeRay. The metadata.name, minReplicas/maxReplicas
// and uniqueness rules reject what KubeRay's operator or webhook rejects later. A group name is the value of
// the ray.io/group pod label, so an empty name or one over 63 characters never yields a pod, and 200 groups
// bound the uniqueness rule's cost. The gcs backend rule closes the gap that KubeRay's field rule leaves when
// the backend changes between unset (redis) and rocksdb.
var stricterThanKubeRay = map[string][]string{
	"": {
		"rule: size(self.metadata.name) <= 53",
		"rule: self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
	},
	".spec": {
		"rule: has(self.managedBy) == has(oldSelf.managedBy)",
		"rule: !has(self.workerGroupSpecs) || self.workerGroupSpecs.all(w, self.workerGroupSpecs.exists_one(o, o.groupName == w.groupName))",
	},
	".spec.gcsFaultToleranceOptions": {
		"rule: (has(self.backend) && has(oldSelf.backend)) || (has(self.backend) ? self.backend : 'redis') == (has(oldSelf.backend) ? oldSelf.backend : 'redis')",
	},
	".spec.workerGroupSpecs[]": {
		"rule: !has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
	},
	".spec.workerGroupSpecs":               {"maxItems: 200"},
	".spec.workerGroupSpecs[].groupName":   {"minLength: 1", "maxLength: 63"},
	".spec.workerGroupSpecs[].replicas":    {"minimum: 0"},
	".spec.workerGroupSpecs[].minReplicas": {"minimum: 0"},
	".spec.workerGroupSpecs[].maxReplicas": {"minimum: 0"},
	".spec.workerGroupSpecs[].numOfHosts":  {"minimum: 0"},
}

// rayJobStricterThanKubeRay and rayServiceStricterThanKubeRay are stricterThanKubeRay for the RayJob and
// RayService CRDs: the RayCluster rules apply to the embedded cluster spec, whose cluster names the RayJob and
// RayService controllers derive.
var (
	rayJobStricterThanKubeRay     = embeddedClusterRules(".spec.rayClusterSpec")
	rayServiceStricterThanKubeRay = embeddedClusterRules(".spec.rayClusterConfig")
	rayCronJobStricterThanKubeRay = embeddedClusterRules(".spec.jobTemplate.rayClusterSpec")
)

// removedKubernetesFields are the field paths of KubeRay's CRDs that kray's lack on purpose, by the last
// elements of the path: PodSpec fields that Kubernetes removed. workloadRef is the Workload API's alpha field of
// Kubernetes 1.35 (KubeRay v1.6 is built on k8s.io/api v0.35), replaced by schedulingGroup in 1.36; no
// kube-apiserver kray supports stores it. Every other missing path fails the test.
var removedKubernetesFields = []string{".spec.workloadRef"}

// embeddedClusterRules is stricterThanKubeRay's spec rules under the schema path of an embedded cluster spec.
func embeddedClusterRules(at string) map[string][]string {
	m := map[string][]string{}
	for path, cs := range stricterThanKubeRay {
		if strings.HasPrefix(path, ".spec") {
			m[at+strings.TrimPrefix(path, ".spec")] = cs
		}
	}
	return m
}

// parityCRDs are the CRDs whose schema must accept everything KubeRay's accepts.
var parityCRDs = []struct {
	path     string
	stricter map[string][]string
}{
	{rayClusterCRDPath, stricterThanKubeRay},
	{rayJobCRDPath, rayJobStricterThanKubeRay},
	{rayServiceCRDPath, rayServiceStricterThanKubeRay},
	{rayCronJobCRDPath, rayCronJobStricterThanKubeRay},
}

// TestSchemaParityWithKubeRay checks, for the RayCluster, RayJob, RayService and RayCronJob CRDs of each
// KubeRay reference release, that every field of KubeRay's v1 schema exists in kray's with the same type,
// default and list semantics, that kray accepts every enum value and satisfies every CEL rule KubeRay
// declares, and that kray adds no constraint beyond the listed ones.
func TestSchemaParityWithKubeRay(t *testing.T) {
	for _, ref := range kubeRayRefs(t) {
		for _, crd := range parityCRDs {
			t.Run(ref.version+"/"+filepath.Base(crd.path), func(t *testing.T) {
				schemaParity(t, ref.version, ref.crd(t, crd.path), ourCRDAt(t, crd.path), crd.stricter)
			})
		}
	}
}

// schemaParity is TestSchemaParityWithKubeRay for one CRD of KubeRay's release version.
func schemaParity(t *testing.T, version string, kubeRay, kray *apiextensionsv1.CustomResourceDefinition, stricter map[string][]string) {
	theirs := schemaPaths(v1Schema(t, kubeRay))
	ours := schemaPaths(v1Schema(t, kray))
	var missing, extra []string
	for _, path := range sortedKeys(theirs) {
		if _, ok := ours[path]; !ok && !removedKubernetesField(path) {
			missing = append(missing, path)
		}
	}
	for _, path := range sortedKeys(ours) {
		if _, ok := theirs[path]; !ok {
			extra = append(extra, path)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d field paths of KubeRay %s are missing from kray's CRD:\n%s", len(missing), version, strings.Join(missing, "\n"))
	}
	t.Logf("%d field paths exist only in kray's CRD (newer KubeRay fields and kray extensions)", len(extra))

	seenStricter := map[string]bool{}
	for _, path := range sortedKeys(theirs) {
		o, ok := ours[path]
		if !ok {
			continue
		}
		th := theirs[path]
		if diff := cmp.Diff(shapeOf(th), shapeOf(o)); diff != "" {
			t.Errorf("%s: schema shape differs from KubeRay's (-kuberay +kray):\n%s", path, diff)
		}
		if got, want := rawJSON(o.Default), rawJSON(th.Default); got != want {
			t.Errorf("%s: default is %s, KubeRay's is %s", path, got, want)
		}
		for _, v := range enumValues(th) {
			if !slices.Contains(enumValues(o), v) {
				t.Errorf("%s: enum value %s accepted by KubeRay is missing (kray's enum: %v)", path, v, enumValues(o))
			}
		}
		for _, r := range th.XValidations {
			if !slices.ContainsFunc(o.XValidations, func(x apiextensionsv1.ValidationRule) bool {
				return x.Rule == r.Rule && x.Message == r.Message
			}) {
				t.Errorf("%s: KubeRay's CEL rule %q (message %q) is missing", path, r.Rule, r.Message)
			}
		}
		for _, c := range addedConstraints(th, o) {
			if !slices.Contains(stricter[path], c) {
				t.Errorf("%s: constraint %q is stricter than KubeRay and not listed as stricter", path, c)
			}
			seenStricter[path+" "+c] = true
		}
	}
	for path, cs := range stricter {
		for _, c := range cs {
			if !seenStricter[path+" "+c] {
				t.Errorf("the stricter list has %s %q, but the CRDs do not differ there", path, c)
			}
		}
	}
}

// removedKubernetesField reports whether path is one of removedKubernetesFields or lies below one.
func removedKubernetesField(path string) bool {
	for _, f := range removedKubernetesFields {
		if i := strings.Index(path, f); i >= 0 {
			rest := path[i+len(f):]
			if rest == "" || rest[0] == '.' || rest[0] == '[' || rest[0] == '{' {
				return true
			}
		}
	}
	return false
}

// schemaShape is the part of a schema node that decides which values it holds and how they merge.
type schemaShape struct {
	Type, Format                   string
	Nullable                       bool
	PreserveUnknownFields          bool
	IntOrString, EmbeddedResource  bool
	ListType, MapType              string
	ListMapKeys                    []string
	HasItems, HasAdditionalProps   bool
	AdditionalPropertiesAllowsNone bool
}

// shapeOf returns the schemaShape of s.
func shapeOf(s *apiextensionsv1.JSONSchemaProps) schemaShape {
	sh := schemaShape{
		Type:                  s.Type,
		Format:                s.Format,
		Nullable:              s.Nullable,
		PreserveUnknownFields: s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields,
		IntOrString:           s.XIntOrString,
		EmbeddedResource:      s.XEmbeddedResource,
		ListMapKeys:           s.XListMapKeys,
		HasItems:              s.Items != nil,
		HasAdditionalProps:    s.AdditionalProperties != nil,
	}
	if s.XListType != nil {
		sh.ListType = *s.XListType
	}
	if s.XMapType != nil {
		sh.MapType = *s.XMapType
	}
	if s.AdditionalProperties != nil {
		sh.AdditionalPropertiesAllowsNone = !s.AdditionalProperties.Allows
	}
	return sh
}

// addedConstraints lists the constraints of ours that theirs lacks, rendered as "name: value" or "rule: ...".
func addedConstraints(theirs, ours *apiextensionsv1.JSONSchemaProps) []string {
	var added []string
	add := func(name string, t, o any) {
		if !reflect.ValueOf(o).IsNil() && !reflect.DeepEqual(t, o) {
			added = append(added, fmt.Sprintf("%s: %v", name, reflect.ValueOf(o).Elem().Interface()))
		}
	}
	// The int32 range on an int32 field only makes the API server enforce the declared format (see
	// hack/crdbounds); it rejects nothing a KubeRay client could decode.
	int32Range := ours.Format == "int32" && ours.Type == "integer"
	if !(int32Range && ours.Minimum != nil && *ours.Minimum == math.MinInt32) {
		add("minimum", theirs.Minimum, ours.Minimum)
	}
	if !(int32Range && ours.Maximum != nil && *ours.Maximum == math.MaxInt32) {
		add("maximum", theirs.Maximum, ours.Maximum)
	}
	add("minLength", theirs.MinLength, ours.MinLength)
	add("maxLength", theirs.MaxLength, ours.MaxLength)
	add("minItems", theirs.MinItems, ours.MinItems)
	add("maxItems", theirs.MaxItems, ours.MaxItems)
	add("minProperties", theirs.MinProperties, ours.MinProperties)
	add("maxProperties", theirs.MaxProperties, ours.MaxProperties)
	if ours.Pattern != theirs.Pattern {
		added = append(added, "pattern: "+ours.Pattern)
	}
	if ours.ExclusiveMinimum != theirs.ExclusiveMinimum || ours.ExclusiveMaximum != theirs.ExclusiveMaximum || ours.UniqueItems != theirs.UniqueItems {
		added = append(added, "exclusive bounds or uniqueItems")
	}
	for _, r := range ours.Required {
		if !slices.Contains(theirs.Required, r) {
			added = append(added, "required: "+r)
		}
	}
	for _, r := range ours.XValidations {
		if !slices.ContainsFunc(theirs.XValidations, func(x apiextensionsv1.ValidationRule) bool { return x.Rule == r.Rule }) {
			added = append(added, "rule: "+r.Rule)
		}
	}
	if len(theirs.Enum) == 0 && len(ours.Enum) > 0 {
		added = append(added, fmt.Sprintf("enum: %v", enumValues(ours)))
	}
	return added
}

// enumValues returns the enum of s as JSON strings.
func enumValues(s *apiextensionsv1.JSONSchemaProps) []string {
	out := make([]string, 0, len(s.Enum))
	for i := range s.Enum {
		out = append(out, rawJSON(&s.Enum[i]))
	}
	return out
}

// rawJSON renders a JSON value canonically, or "<none>" when it is absent.
func rawJSON(v *apiextensionsv1.JSON) string {
	if v == nil || len(v.Raw) == 0 {
		return "<none>"
	}
	var x any
	if err := json.Unmarshal(v.Raw, &x); err != nil {
		return string(v.Raw)
	}
	b, _ := json.Marshal(x)
	return string(b)
}

// TestCoreFieldsDefaultsAndEnums pins the defaults, enums and required fields that spec/raycluster.md §2 lists
// for the CORE fields, in kray's CRD and, where the field exists there, in KubeRay's.
func TestCoreFieldsDefaultsAndEnums(t *testing.T) {
	ours := schemaPaths(v1Schema(t, ourCRD(t)))
	theirs := schemaPaths(v1Schema(t, kubeRayCRD(t)))
	tests := []struct {
		path string
		// def is the JSON default, "<none>" for none.
		def string
		// enum is kray's exact enum; kubeRayEnum is KubeRay's where it differs.
		enum, kubeRayEnum []string
		required          []string
	}{
		{path: ".spec", def: "<none>", required: []string{"headGroupSpec"}},
		{path: ".spec.headGroupSpec", def: "<none>", required: []string{"template"}},
		{path: ".spec.headGroupSpec.template.spec", def: "<none>", required: []string{"containers"}},
		{path: ".spec.workerGroupSpecs[]", def: "<none>", required: []string{"groupName", "maxReplicas", "minReplicas", "template"}},
		{path: ".spec.workerGroupSpecs[].template.spec", def: "<none>", required: []string{"containers"}},
		{path: ".spec.workerGroupSpecs[].replicas", def: "0"},
		{path: ".spec.workerGroupSpecs[].minReplicas", def: "0"},
		{path: ".spec.workerGroupSpecs[].maxReplicas", def: "2147483647"},
		{path: ".spec.workerGroupSpecs[].numOfHosts", def: "1"},
		{path: ".spec.workerGroupSpecs[].scaleStrategy.workersToDelete[]", def: "<none>"},
		{path: ".spec.workerGroupSpecs[].idleTimeoutSeconds", def: "<none>"},
		{path: ".spec.enableInTreeAutoscaling", def: "<none>"},
		{path: ".spec.suspend", def: "<none>"},
		{path: ".spec.managedBy", def: "<none>"},
		{path: ".spec.rayVersion", def: "<none>"},
		{path: ".spec.headServiceAnnotations{}", def: "<none>"},
		{path: ".spec.headGroupSpec.rayStartParams{}", def: "<none>"},
		{path: ".spec.headGroupSpec.serviceType", def: "<none>"},
		{path: ".spec.autoscalerOptions.upscalingMode", def: "<none>", enum: []string{`"Default"`, `"Aggressive"`, `"Conservative"`}},
		{path: ".spec.autoscalerOptions.version", def: "<none>", enum: []string{`"v1"`, `"v2"`}},
		{path: ".spec.autoscalerOptions.imagePullPolicy", def: "<none>"},
		{path: ".spec.upgradeStrategy.type", def: "<none>", enum: []string{`"Recreate"`, `"None"`, `"RollingUpdate"`}, kubeRayEnum: []string{`"Recreate"`, `"None"`}},
		{path: ".status.conditions[]", def: "<none>", required: []string{"lastTransitionTime", "message", "reason", "status", "type"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			check := func(who string, paths map[string]*apiextensionsv1.JSONSchemaProps, enum []string) {
				s, ok := paths[tt.path]
				if !ok {
					t.Errorf("%s CRD has no %s", who, tt.path)
					return
				}
				if got := rawJSON(s.Default); got != tt.def {
					t.Errorf("%s default = %s, want %s", who, got, tt.def)
				}
				if diff := cmp.Diff(enum, enumValues(s), cmp.Transformer("nilToEmpty", func(x []string) []string {
					if x == nil {
						return []string{}
					}
					return x
				})); diff != "" {
					t.Errorf("%s enum (-want +got):\n%s", who, diff)
				}
				for _, r := range tt.required {
					if !slices.Contains(s.Required, r) {
						t.Errorf("%s does not require %s (required: %v)", who, r, s.Required)
					}
				}
			}
			check("kray", ours, tt.enum)
			if _, ok := theirs[tt.path]; ok {
				want := tt.enum
				if tt.kubeRayEnum != nil {
					want = tt.kubeRayEnum
				}
				check("KubeRay "+newestKubeRay(t).version, theirs, want)
			}
		})
	}
}

// TestPrinterColumnsMatchKubeRay checks the kubectl columns (names, order, types, paths, priorities) of every
// CRD against the newest KubeRay's (v1.7 added RayCronJob's timezone column).
func TestPrinterColumnsMatchKubeRay(t *testing.T) {
	ref := newestKubeRay(t)
	for _, crd := range parityCRDs {
		theirs := crdVersion(t, ref.crd(t, crd.path), "v1").AdditionalPrinterColumns
		ours := crdVersion(t, ourCRDAt(t, crd.path), "v1").AdditionalPrinterColumns
		if diff := cmp.Diff(theirs, ours); diff != "" {
			t.Errorf("%s: printer columns differ from KubeRay %s's (-kuberay +kray):\n%s", crd.path, ref.version, diff)
		}
	}
	ours := crdVersion(t, ourCRD(t), "v1").AdditionalPrinterColumns
	wide := map[string]bool{}
	for _, c := range ours {
		if c.Priority == 1 {
			wide[c.Name] = true
		}
	}
	if want := map[string]bool{"tpus": true, "head pod IP": true, "head service IP": true}; !reflect.DeepEqual(wide, want) {
		t.Errorf("columns shown only with -o wide = %v, want %v", wide, want)
	}
}

// TestCRDIdentityMatchesKubeRay checks group, names, scope, categories and subresources of both CRDs, and
// that v1 is the served storage version.
func TestCRDIdentityMatchesKubeRay(t *testing.T) {
	for _, ref := range kubeRayRefs(t) {
		for _, crd := range parityCRDs {
			t.Run(ref.version+"/"+filepath.Base(crd.path), func(t *testing.T) {
				crdIdentity(t, ref.crd(t, crd.path), ourCRDAt(t, crd.path))
			})
		}
	}
}

// crdIdentity is TestCRDIdentityMatchesKubeRay for one CRD.
func crdIdentity(t *testing.T, theirs, ours *apiextensionsv1.CustomResourceDefinition) {
	if ours.Name != theirs.Name || ours.Spec.Group != theirs.Spec.Group || ours.Spec.Scope != theirs.Spec.Scope {
		t.Errorf("name/group/scope = %s/%s/%s, KubeRay's = %s/%s/%s", ours.Name, ours.Spec.Group, ours.Spec.Scope,
			theirs.Name, theirs.Spec.Group, theirs.Spec.Scope)
	}
	if diff := cmp.Diff(theirs.Spec.Names, ours.Spec.Names); diff != "" {
		t.Errorf("names differ (-kuberay +kray):\n%s", diff)
	}
	if len(ours.Spec.Names.ShortNames) != 0 || !slices.Equal(ours.Spec.Names.Categories, []string{"all"}) {
		t.Errorf("shortNames = %v, categories = %v; want none and [all]", ours.Spec.Names.ShortNames, ours.Spec.Names.Categories)
	}
	v := crdVersion(t, ours, "v1")
	if !v.Served || !v.Storage {
		t.Errorf("v1 served=%t storage=%t, want both", v.Served, v.Storage)
	}
	if diff := cmp.Diff(crdVersion(t, theirs, "v1").Subresources, v.Subresources); diff != "" {
		t.Errorf("subresources differ (-kuberay +kray):\n%s", diff)
	}
	if v.Subresources == nil || v.Subresources.Status == nil || v.Subresources.Scale != nil {
		t.Errorf("subresources = %+v, want status only", v.Subresources)
	}
	if len(ours.Spec.Versions) != 1 {
		t.Errorf("kray serves %d versions, want only v1", len(ours.Spec.Versions))
	}
}
