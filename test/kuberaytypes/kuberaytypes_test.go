// Package kuberaytypes checks kray against clients that hold KubeRay v1.5.0's Go types, the way KubeRay's
// kubectl plugin (`kubectl ray scale cluster`) and other tools write RayClusters: a typed GET, a change, a
// typed Update. It is its own module so that KubeRay's module never enters kray's build. It needs a running
// kray on a cluster: KUBECONFIG, as for test/e2e (hack/e2e.sh runs it).
package kuberaytypes

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
)

var rayClusters = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}

// The kray extensions of the cluster below, as the user wrote them.
const clusterManifest = `{
  "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "typed"},
  "spec": {
    "rayVersion": "2.46.0",
    "upgradeStrategy": {"type": "RollingUpdate"},
    "workerDrain": {"timeoutSeconds": 120},
    "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
      {"name": "ray-head", "image": "rayproject/ray:2.46.0", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}},
    "workerGroupSpecs": [{"groupName": "workers", "replicas": 1, "minReplicas": 0, "maxReplicas": 5, "rayStartParams": {},
      "rollingUpdate": {"maxUnavailable": 2},
      "template": {"spec": {"containers": [
        {"name": "ray-worker", "image": "rayproject/ray:2.46.0", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}]
  }
}`

func clients(t *testing.T) (rayclient.Interface, dynamic.Interface, kubernetes.Interface) {
	t.Helper()
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		t.Skip("KUBECONFIG is not set: run hack/e2e.sh")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	return rayclient.NewForConfigOrDie(cfg), dynamic.NewForConfigOrDie(cfg), kubernetes.NewForConfigOrDie(cfg)
}

// eventually polls check until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cloneSetSettings reads, from the group's CloneSet, what kray's extensions set: the drain hook and the
// update strategy's maxUnavailable.
func cloneSetSettings(ctx context.Context, dyn dynamic.Interface, ns string) (hook bool, maxUnavailable string, replicas int64, err error) {
	cs, err := dyn.Resource(schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1alpha1", Resource: "clonesets"}).
		Namespace(ns).Get(ctx, "typed-workers-worker", metav1.GetOptions{})
	if err != nil {
		return false, "", 0, err
	}
	_, hook, _ = unstructured.NestedMap(cs.Object, "spec", "lifecycle", "preDelete")
	mu, _, _ := unstructured.NestedFieldNoCopy(cs.Object, "spec", "updateStrategy", "maxUnavailable")
	replicas, _, _ = unstructured.NestedInt64(cs.Object, "spec", "replicas")
	return hook, fmt.Sprint(mu), replicas, nil
}

// A typed Update with KubeRay v1.5.0's types drops kray's fields from the spec (measured and logged); the
// settings go on applying from kray's annotations, and the change the client made (replicas) is applied.
func TestKubeRayTypedUpdateKeepsKrayExtensions(t *testing.T) {
	ray, dyn, kube := clients(t)
	ctx := context.Background()
	ns := fmt.Sprintf("kuberaytypes-%d", time.Now().Unix()%100000)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			_ = kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		}
	})
	obj := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(clusterManifest), &obj.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(rayClusters).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() error {
		hook, mu, _, err := cloneSetSettings(ctx, dyn, ns)
		if err != nil || !hook || mu != "2" {
			return fmt.Errorf("before the typed update: CloneSet drain hook %t, maxUnavailable %s, err %v", hook, mu, err)
		}
		return nil
	})

	// What `kubectl ray scale cluster typed --worker-group workers --replicas 3` does: a read and an update,
	// read again when the operator's status write came in between.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rc, err := ray.RayV1().RayClusters(ns).Get(ctx, "typed", metav1.GetOptions{})
		if err != nil {
			return err
		}
		rc.Spec.WorkerGroupSpecs[0].Replicas = ptrTo[int32](3)
		_, err = ray.RayV1().RayClusters(ns).Update(ctx, rc, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	after, err := dyn.Resource(rayClusters).Namespace(ns).Get(ctx, "typed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, drainInSpec, _ := unstructured.NestedMap(after.Object, "spec", "workerDrain")
	groups, _, _ := unstructured.NestedSlice(after.Object, "spec", "workerGroupSpecs")
	_, rollingInSpec, _ := unstructured.NestedMap(groups[0].(map[string]any), "rollingUpdate")
	strategy, _, _ := unstructured.NestedString(after.Object, "spec", "upgradeStrategy", "type")
	t.Logf("after the typed Update, the spec holds: workerDrain %t, rollingUpdate %t, upgradeStrategy.type %q", drainInSpec, rollingInSpec, strategy)
	if drainInSpec || rollingInSpec {
		t.Logf("KubeRay v1.5.0's types kept kray's fields: the annotations were not needed this time")
	}

	eventually(t, 60*time.Second, func() error {
		hook, mu, replicas, err := cloneSetSettings(ctx, dyn, ns)
		if err != nil || !hook || mu != "2" || replicas != 3 {
			return fmt.Errorf("after the typed update: CloneSet drain hook %t (want true), maxUnavailable %s (want 2), replicas %d (want 3), err %v",
				hook, mu, replicas, err)
		}
		return nil
	})
	annotations := after.GetAnnotations()
	if annotations["kray.io/worker-drain"] == "" || annotations["kray.io/rolling-update"] == "" {
		t.Errorf("kray's annotations are missing: %v", annotations)
	}
}

func ptrTo[T any](v T) *T { return &v }
