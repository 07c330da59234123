package v1_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/runtime"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/validation"
)

// TestCRDPassesAPIServerValidation runs the apiserver's own CRD validation, which compiles every CEL rule and
// rejects rules whose estimated cost exceeds the apiserver's limits.
func TestCRDPassesAPIServerValidation(t *testing.T) {
	crd := ourCRD(t)
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	scheme.Default(crd)
	internal := &apiextensions.CustomResourceDefinition{}
	if err := scheme.Convert(crd, internal, nil); err != nil {
		t.Fatal(err)
	}
	if errs := apiextensionsvalidation.ValidateCustomResourceDefinition(context.Background(), internal); len(errs) > 0 {
		t.Errorf("the apiserver would reject the CRD:\n%s", strings.Join(errorStrings(errs), "\n"))
	}
}

// baseCluster is a minimal valid RayCluster with one worker group.
const baseCluster = `
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: raycluster-sample
  namespace: default
spec:
  headGroupSpec:
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.46.0
  workerGroupSpecs:
  - groupName: small
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.46.0
`

// cluster returns baseCluster with the given edits applied.
func cluster(t *testing.T, edits ...func(obj map[string]any)) map[string]any {
	t.Helper()
	obj := decodeYAML(t, baseCluster)
	for _, edit := range edits {
		edit(obj)
	}
	return obj
}

// spec returns the spec map of obj.
func spec(obj map[string]any) map[string]any { return obj["spec"].(map[string]any) }

// group returns worker group i of obj.
func group(obj map[string]any, i int) map[string]any {
	return spec(obj)["workerGroupSpecs"].([]any)[i].(map[string]any)
}

func withName(name string) func(map[string]any) {
	return func(obj map[string]any) { obj["metadata"].(map[string]any)["name"] = name }
}

func withSpec(key string, value any) func(map[string]any) {
	return func(obj map[string]any) { spec(obj)[key] = value }
}

func withoutSpec(key string) func(map[string]any) {
	return func(obj map[string]any) { delete(spec(obj), key) }
}

func withGroupField(i int, key string, value any) func(map[string]any) {
	return func(obj map[string]any) { group(obj, i)[key] = value }
}

func withoutGroupField(i int, key string) func(map[string]any) {
	return func(obj map[string]any) { delete(group(obj, i), key) }
}

// withGroups replaces the worker groups by copies of the first one named after names.
func withGroups(names ...string) func(map[string]any) {
	return func(obj map[string]any) {
		first := group(obj, 0)
		groups := make([]any, 0, len(names))
		for _, n := range names {
			g := runtime.DeepCopyJSONValue(first).(map[string]any)
			g["groupName"] = n
			groups = append(groups, g)
		}
		spec(obj)["workerGroupSpecs"] = groups
	}
}

// groupNames returns n distinct group names of the given length (at least 4) that differ only at the end,
// the worst case for string comparison.
func groupNames(n, length int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("g%0*d", length-1, i)
	}
	return names
}

func TestValidationRules(t *testing.T) {
	v := newCRValidator(t, ourCRD(t))
	tests := []struct {
		name string
		obj  map[string]any
		// old is nil for a create.
		old map[string]any
		// wantErrs are substrings of the expected errors; empty means the request is accepted.
		wantErrs []string
	}{
		{name: "minimal cluster", obj: cluster(t)},
		{name: "cluster without worker groups", obj: cluster(t, withoutSpec("workerGroupSpecs"))},
		{name: "missing headGroupSpec", obj: cluster(t, withoutSpec("headGroupSpec")), wantErrs: []string{"spec.headGroupSpec: Required value"}},

		{name: "name of 53 characters", obj: cluster(t, withName("a"+strings.Repeat("b", 52)))},
		{name: "name of 54 characters", obj: cluster(t, withName("a"+strings.Repeat("b", 53))),
			wantErrs: []string{"metadata.name must be no more than 53 characters"}},
		{name: "name starting with a digit", obj: cluster(t, withName("1cluster")), wantErrs: []string{"metadata.name must be a valid DNS-1035 label"}},
		{name: "name with upper case", obj: cluster(t, withName("Cluster")), wantErrs: []string{"metadata.name must be a valid DNS-1035 label"}},
		{name: "name with a dot", obj: cluster(t, withName("ray.cluster")), wantErrs: []string{"metadata.name must be a valid DNS-1035 label"}},
		{name: "name ending with a dash", obj: cluster(t, withName("cluster-")), wantErrs: []string{"metadata.name must be a valid DNS-1035 label"}},

		{name: "distinct group names", obj: cluster(t, withGroups("a", "b", "c"))},
		{name: "duplicate group names", obj: cluster(t, withGroups("a", "b", "a")),
			wantErrs: []string{"spec.workerGroupSpecs: Invalid value", "workerGroupSpecs[].groupName must be unique"}},
		{name: "200 groups with 63-character names fit the CEL runtime cost budget", obj: cluster(t, withGroups(groupNames(200, 63)...))},
		// Templates are dropped to keep the test fast; only the item count matters here.
		{name: "201 groups", obj: cluster(t, withoutGroupField(0, "template"), withGroups(groupNames(201, 10)...)),
			wantErrs: []string{"spec.workerGroupSpecs: Too many: 201: must have at most 200 items"}},
		{name: "group name of 64 characters", obj: cluster(t, withGroupField(0, "groupName", strings.Repeat("g", 64))),
			wantErrs: []string{"spec.workerGroupSpecs[0].groupName: Too long: may not be more than 63 bytes"}},
		{name: "empty group name", obj: cluster(t, withGroupField(0, "groupName", "")), wantErrs: []string{"spec.workerGroupSpecs[0].groupName"}},
		{name: "missing group name", obj: cluster(t, withoutGroupField(0, "groupName")), wantErrs: []string{"spec.workerGroupSpecs[0].groupName: Required value"}},
		{name: "missing worker template", obj: cluster(t, withoutGroupField(0, "template")), wantErrs: []string{"spec.workerGroupSpecs[0].template: Required value"}},

		{name: "minReplicas equal to maxReplicas", obj: cluster(t, withGroupField(0, "minReplicas", int64(3)), withGroupField(0, "maxReplicas", int64(3)))},
		{name: "minReplicas with defaulted maxReplicas", obj: cluster(t, withGroupField(0, "minReplicas", int64(5)))},
		{name: "minReplicas greater than maxReplicas", obj: cluster(t, withGroupField(0, "minReplicas", int64(4)), withGroupField(0, "maxReplicas", int64(3))),
			wantErrs: []string{"spec.workerGroupSpecs[0].minReplicas", "workerGroupSpecs[].minReplicas must be less than or equal to maxReplicas"}},
		{name: "replicas above maxReplicas is clamped, not rejected", obj: cluster(t, withGroupField(0, "replicas", int64(10)), withGroupField(0, "maxReplicas", int64(3)))},
		{name: "negative replicas", obj: cluster(t, withGroupField(0, "replicas", int64(-1))),
			wantErrs: []string{"spec.workerGroupSpecs[0].replicas in body should be greater than or equal to 0"}},
		{name: "negative minReplicas", obj: cluster(t, withGroupField(0, "minReplicas", int64(-1))),
			wantErrs: []string{"spec.workerGroupSpecs[0].minReplicas in body should be greater than or equal to 0"}},
		{name: "negative maxReplicas", obj: cluster(t, withGroupField(0, "maxReplicas", int64(-1))),
			wantErrs: []string{"spec.workerGroupSpecs[0].maxReplicas in body should be greater than or equal to 0"}},
		{name: "zero numOfHosts is accepted and means one", obj: cluster(t, withGroupField(0, "numOfHosts", int64(0)))},
		{name: "negative numOfHosts", obj: cluster(t, withGroupField(0, "numOfHosts", int64(-1))),
			wantErrs: []string{"spec.workerGroupSpecs[0].numOfHosts in body should be greater than or equal to 0"}},

		{name: "managedBy kuberay", obj: cluster(t, withSpec("managedBy", "ray.io/kuberay-operator"))},
		{name: "managedBy multikueue", obj: cluster(t, withSpec("managedBy", "kueue.x-k8s.io/multikueue"))},
		{name: "managedBy other", obj: cluster(t, withSpec("managedBy", "example.com/other")),
			wantErrs: []string{"spec.managedBy", "the managedBy field value must be either 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'"}},
		{name: "managedBy unchanged", obj: cluster(t, withSpec("managedBy", "kueue.x-k8s.io/multikueue")),
			old: cluster(t, withSpec("managedBy", "kueue.x-k8s.io/multikueue"))},
		{name: "managedBy changed", obj: cluster(t, withSpec("managedBy", "ray.io/kuberay-operator")),
			old: cluster(t, withSpec("managedBy", "kueue.x-k8s.io/multikueue")), wantErrs: []string{"spec.managedBy", "the managedBy field is immutable"}},
		{name: "managedBy added", obj: cluster(t, withSpec("managedBy", "kueue.x-k8s.io/multikueue")),
			old: cluster(t), wantErrs: []string{"spec.managedBy", "the managedBy field is immutable"}},
		{name: "managedBy removed", obj: cluster(t),
			old: cluster(t, withSpec("managedBy", "kueue.x-k8s.io/multikueue")), wantErrs: []string{"spec.managedBy", "the managedBy field is immutable"}},
		{name: "update of replicas", obj: cluster(t, withGroupField(0, "replicas", int64(2))), old: cluster(t)},

		{name: "upgradeStrategy Recreate", obj: cluster(t, withSpec("upgradeStrategy", map[string]any{"type": "Recreate"}))},
		{name: "upgradeStrategy RollingUpdate (kray extension)", obj: cluster(t, withSpec("upgradeStrategy", map[string]any{"type": "RollingUpdate"}))},
		{name: "upgradeStrategy unknown", obj: cluster(t, withSpec("upgradeStrategy", map[string]any{"type": "Rolling"})),
			wantErrs: []string{`spec.upgradeStrategy.type: Unsupported value: "Rolling"`}},
		{name: "autoscaler version unknown", obj: cluster(t, withSpec("autoscalerOptions", map[string]any{"version": "v3"})),
			wantErrs: []string{`spec.autoscalerOptions.version: Unsupported value: "v3"`}},

		{name: "gcs backend set to its default", obj: cluster(t, withSpec("gcsFaultToleranceOptions", map[string]any{"backend": "redis", "redisAddress": "redis:6379"})),
			old: cluster(t, withSpec("gcsFaultToleranceOptions", map[string]any{"redisAddress": "redis:6379"}))},
		{name: "gcs backend switched", obj: cluster(t, withSpec("gcsFaultToleranceOptions", map[string]any{"backend": "rocksdb"})),
			old:      cluster(t, withSpec("gcsFaultToleranceOptions", map[string]any{"backend": "redis", "redisAddress": "redis:6379"})),
			wantErrs: []string{"gcsFaultToleranceOptions.backend is immutable"}},
		{name: "gcs backend removed", obj: cluster(t, withSpec("gcsFaultToleranceOptions", map[string]any{"redisAddress": "redis:6379"})),
			old:      cluster(t, withSpec("gcsFaultToleranceOptions", map[string]any{"backend": "rocksdb"})),
			wantErrs: []string{"spec.gcsFaultToleranceOptions.backend", "gcsFaultToleranceOptions.backend is immutable"}},
		{name: "gcs backend switched from unset", obj: cluster(t, withSpec("gcsFaultToleranceOptions", map[string]any{"backend": "rocksdb"})),
			old:      cluster(t, withSpec("gcsFaultToleranceOptions", map[string]any{"redisAddress": "redis:6379"})),
			wantErrs: []string{"spec.gcsFaultToleranceOptions.backend", "gcsFaultToleranceOptions.backend is immutable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := errorStrings(v.admit(tt.obj, tt.old))
			if len(tt.wantErrs) == 0 {
				if len(got) > 0 {
					t.Errorf("rejected, want accepted:\n%s", strings.Join(got, "\n"))
				}
				return
			}
			if !containsAll(got, tt.wantErrs) {
				t.Errorf("errors:\n%s\nwant errors containing %q", strings.Join(got, "\n"), tt.wantErrs)
			}
		})
	}
}

// TestDefaults checks the values that the apiserver fills in on create.
func TestDefaults(t *testing.T) {
	v := newCRValidator(t, ourCRD(t))
	got := group(v.normalize(cluster(t)), 0)
	want := map[string]any{"replicas": int64(0), "minReplicas": int64(0), "maxReplicas": int64(2147483647), "numOfHosts": int64(1), "priority": int64(0)}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("workerGroupSpecs[0].%s = %v (%T), want %v", k, got[k], got[k], w)
		}
	}
}

// TestKubeRaySamplesAreAccepted admits every RayCluster sample of each KubeRay reference release, and the
// cluster specs embedded in its RayJob and RayService samples, with both CRDs: kray must accept what KubeRay
// accepts and store it identically (same pruning, same defaults).
func TestKubeRaySamplesAreAccepted(t *testing.T) {
	for _, ref := range kubeRayRefs(t) {
		t.Run(ref.version, func(t *testing.T) { kubeRayClusterSamplesAreAccepted(t, ref) })
	}
}

// kubeRayClusterSamplesAreAccepted is TestKubeRaySamplesAreAccepted for one release.
func kubeRayClusterSamplesAreAccepted(t *testing.T, ref kubeRayRef) {
	ours, theirs := newCRValidator(t, ourCRD(t)), newCRValidator(t, ref.crd(t, rayClusterCRDPath))
	files, err := filepath.Glob(filepath.Join(ref.samples, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range decodeYAMLDocuments(t, data) {
			obj, ok := asRayCluster(doc)
			if !ok {
				continue
			}
			seen++
			name := fmt.Sprintf("%s/%v", filepath.Base(file), obj["metadata"].(map[string]any)["name"])
			t.Run(name, func(t *testing.T) {
				if errs := theirs.admit(obj, nil); len(errs) > 0 {
					t.Skipf("KubeRay's CRD rejects this sample too: %v", errorStrings(errs))
				}
				if errs := ours.admit(obj, nil); len(errs) > 0 {
					t.Errorf("kray rejects a sample that KubeRay accepts:\n%s", strings.Join(errorStrings(errs), "\n"))
				}
				// Pruning kray's result with KubeRay's schema drops defaults of fields that KubeRay lacks
				// (workerGroupSpecs[].priority); anything kray pruned or defaulted differently remains.
				if diff := cmp.Diff(theirs.normalize(obj), theirs.prune(ours.normalize(obj))); diff != "" {
					t.Errorf("stored object differs (-kuberay +kray):\n%s", diff)
				}
				// And kray's controller validation, on the object as the API server stores it.
				rc := &rayv1.RayCluster{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(ours.normalize(obj), rc); err != nil {
					t.Fatal(err)
				}
				if rc.Name == "" {
					rc.Name = "from-generate-name" // a RayJob with generateName; its controller names the cluster
				}
				err := errors.Join(validation.Metadata(rc), validation.Spec(rc))
				if want, refused := refusedClusterSamples[filepath.Base(file)]; refused {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("kray's validation: %v, want the documented refusal %q", err, want)
					}
				} else if err != nil {
					t.Errorf("kray's validation refuses a KubeRay sample: %v", err)
				}
			})
		}
	}
	if seen < 30 {
		t.Errorf("found only %d RayCluster specs in KubeRay %s's samples; the sample layout may have changed", seen, ref.version)
	}
}

// refusedClusterSamples are the KubeRay samples whose cluster asks for a feature behind a gate that is off by
// default, with the words of the refusal kray's validation gives then (reported in the object's status and an
// event), as KubeRay v1.7's.
var refusedClusterSamples = map[string]string{
	"ray-cluster.historyserver.yaml":           "RayClusterHistoryServer feature gate is not enabled",
	"ray-cluster.mtls.yaml":                    "spec.tlsOptions requires the RayClusterMTLS feature gate to be enabled",
	"ray-cluster.network-policy-deny-all.yaml": "spec.networkPolicy requires the RayClusterNetworkPolicy feature gate to be enabled",
	"ray-cluster.embedded-gcs-ft.yaml":         "requires the GCSFaultToleranceEmbeddedStorage feature gate to be enabled",
}

// asRayCluster returns doc if it is a ray.io/v1 RayCluster, or a RayCluster wrapping the cluster spec of a
// RayJob or RayService.
func asRayCluster(doc map[string]any) (map[string]any, bool) {
	if doc["apiVersion"] != "ray.io/v1" {
		return nil, false
	}
	var clusterSpec any
	switch doc["kind"] {
	case "RayCluster":
		return doc, true
	case "RayJob":
		clusterSpec = doc["spec"].(map[string]any)["rayClusterSpec"]
	case "RayService":
		clusterSpec = doc["spec"].(map[string]any)["rayClusterConfig"]
	}
	if clusterSpec == nil {
		return nil, false
	}
	return map[string]any{
		"apiVersion": "ray.io/v1",
		"kind":       "RayCluster",
		"metadata":   doc["metadata"],
		"spec":       clusterSpec,
	}, true
}

// TestKubeRayRayJobSamplesAreAccepted checks that kray's RayJob CRD admits every RayJob among KubeRay's
// samples and stores it as KubeRay's CRD would, and that kray's controller validation accepts it unless it
// is a documented refusal.
func TestKubeRayRayJobSamplesAreAccepted(t *testing.T) {
	for _, ref := range kubeRayRefs(t) {
		seen := kubeRaySamplesAreAccepted(t, ref, "ray-job.*.yaml", "RayJob", rayJobCRDPath, func(t *testing.T, file string, stored map[string]any) {
			job := &rayv1.RayJob{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(stored, job); err != nil {
				t.Fatal(err)
			}
			if job.Name == "" {
				job.Name = "from-generate-name" // the API server names it
			}
			// With KubeRay's RayJobDeletionPolicy gate on, as its deletionStrategy sample needs.
			err := errors.Join(validation.RayJobMetadata(job), validation.RayJobSpec(job, validation.RayJobOptions{DeletionPolicy: true}))
			if want, refused := refusedClusterSamples[file]; refused {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("kray's validation: %v, want the documented refusal %q", err, want)
				}
			} else if err != nil {
				t.Errorf("kray's validation refuses a KubeRay sample: %v", err)
			}
		})
		if seen < 15 {
			t.Errorf("found only %d RayJobs in KubeRay %s's samples; the sample layout may have changed", seen, ref.version)
		}
	}
}

// TestKubeRayRayServiceSamplesAreAccepted checks that kray's RayService CRD admits every RayService among
// KubeRay's samples, stores it as KubeRay's CRD would, and that kray's controller validation accepts it.
func TestKubeRayRayServiceSamplesAreAccepted(t *testing.T) {
	for _, ref := range kubeRayRefs(t) {
		seen := kubeRaySamplesAreAccepted(t, ref, "ray-service.*.yaml", "RayService", rayServiceCRDPath, func(t *testing.T, _ string, stored map[string]any) {
			svc := &rayv1.RayService{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(stored, svc); err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(validation.RayServiceMetadata(svc), validation.RayServiceSpec(svc, validation.RayServiceOptions{})); err != nil {
				t.Errorf("kray's validation refuses a KubeRay sample: %v", err)
			}
		})
		if seen < 12 {
			t.Errorf("found %d RayServices in KubeRay %s's samples, want at least 12; the sample layout may have changed", seen, ref.version)
		}
	}
}

// TestKubeRayRayCronJobSamplesAreAccepted checks KubeRay v1.7's RayCronJob samples likewise, and that kray's
// controller validation reads their schedules.
func TestKubeRayRayCronJobSamplesAreAccepted(t *testing.T) {
	seen := kubeRaySamplesAreAccepted(t, newestKubeRay(t), "ray-cronjob*.yaml", "RayCronJob", rayCronJobCRDPath, func(t *testing.T, _ string, stored map[string]any) {
		cj := &rayv1.RayCronJob{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(stored, cj); err != nil {
			t.Fatal(err)
		}
		if _, err := validation.RayCronJobSpec(cj, validation.RayJobOptions{DeletionPolicy: true}); err != nil {
			t.Errorf("kray's validation refuses a KubeRay sample: %v", err)
		}
	})
	if seen != 2 {
		t.Errorf("found %d RayCronJobs in KubeRay's samples, want 2", seen)
	}
}

// kubeRaySamplesAreAccepted admits each document of kind in ref's samples matching glob with kray's CRD at
// crdPath, checks that it is stored as KubeRay's CRD stores it, and then runs validate on the stored object;
// it returns how many documents it checked.
func kubeRaySamplesAreAccepted(t *testing.T, ref kubeRayRef, glob, kind, crdPath string, validate func(t *testing.T, file string, stored map[string]any)) int {
	ours, theirs := newCRValidator(t, ourCRDAt(t, crdPath)), newCRValidator(t, ref.crd(t, crdPath))
	files, err := filepath.Glob(filepath.Join(ref.samples, glob))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range decodeYAMLDocuments(t, data) {
			if doc["apiVersion"] != "ray.io/v1" || doc["kind"] != kind {
				continue
			}
			seen++
			t.Run(ref.version+"/"+filepath.Base(file), func(t *testing.T) {
				if errs := theirs.admit(doc, nil); len(errs) > 0 {
					t.Skipf("KubeRay's CRD rejects this sample too: %v", errorStrings(errs))
				}
				if errs := ours.admit(doc, nil); len(errs) > 0 {
					t.Errorf("kray rejects a sample that KubeRay accepts:\n%s", strings.Join(errorStrings(errs), "\n"))
				}
				if diff := cmp.Diff(theirs.normalize(doc), theirs.prune(ours.normalize(doc))); diff != "" {
					t.Errorf("stored object differs (-kuberay +kray):\n%s", diff)
				}
				validate(t, filepath.Base(file), ours.normalize(doc))
			})
		}
	}
	return seen
}
