package e2e

import (
	"os/exec"
	"time"

	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kray-project/kray/internal/moddir"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/test/install"
)

// TestInstall checks kray's two install paths against the live cluster without changing it: every object of
// config/default (kustomize) and of charts/kray (Helm, CRDs included) is server-side applied with dryRun=All
// in install order, as `kubectl apply --server-side --dry-run=server` does, so the API server's validation,
// admission (including Pod Security) and webhooks judge each one. Any API warning fails the test.
func TestInstall(t *testing.T) {
	ensureServiceMonitorCRD(t)
	t.Run("kustomize config/default", func(t *testing.T) {
		objs, err := install.Kustomize(filepath.Join(repoRoot, "config", "default"))
		if err != nil {
			t.Fatal(err)
		}
		// A dry-run Namespace is not created, so the namespaced objects need the real one.
		ensureNamespace(t, "kray-system")
		dryRunApply(t, objs)
	})

	t.Run("helm charts/kray", func(t *testing.T) {
		ns := namespace(t)
		restrictPodSecurity(t, ns)
		values := map[string]any{
			"watchNamespaces": []any{ns},
			"metrics":         map[string]any{"serviceMonitor": map[string]any{"enabled": served(t, serviceMonitor)}},
		}
		objs, err := install.HelmChart(filepath.Join(repoRoot, "charts", "kray"), install.Release{Name: "kray-e2e", Namespace: ns}, values)
		if err != nil {
			t.Fatal(err)
		}
		dryRunApply(t, objs)
	})

	t.Run("kustomize config/prometheus", func(t *testing.T) {
		objs, err := install.Kustomize(filepath.Join(repoRoot, "config", "prometheus"))
		if err != nil {
			t.Fatal(err)
		}
		ensureNamespace(t, "kray-system")
		dryRunApply(t, objs)
	})
}

// prometheusOperator is the release whose ServiceMonitor CRD is installed when the cluster lacks one, so
// the sample ServiceMonitor is validated against the real schema rather than skipped.
const prometheusOperator, prometheusOperatorVersion = "github.com/prometheus-operator/prometheus-operator", "v0.85.0"

// ensureServiceMonitorCRD installs the ServiceMonitor CRD from the Prometheus Operator module when the
// cluster does not serve it yet (the local cluster has no Prometheus Operator).
func ensureServiceMonitorCRD(t *testing.T) {
	t.Helper()
	if served(t, serviceMonitor) {
		return
	}
	dir, err := moddir.Dir(prometheusOperator, prometheusOperatorVersion)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_servicemonitors.yaml")
	out, err := exec.Command("kubectl", "apply", "--server-side", "-f", file).CombinedOutput()
	if err != nil {
		t.Fatalf("install the ServiceMonitor CRD: %v\n%s", err, out)
	}
	deadline := time.Now().Add(readyTimeout)
	for !served(t, serviceMonitor) {
		if time.Now().After(deadline) {
			t.Fatal("the ServiceMonitor CRD was installed but is not served")
		}
		time.Sleep(poll)
	}
}

var serviceMonitor = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}

// dryRunApply server-side applies each object with dryRun=All, in order, and fails on any error or API
// warning. Nothing is persisted.
func dryRunApply(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	if len(objs) == 0 {
		t.Fatal("nothing to apply")
	}
	warnings := &warningRecorder{}
	cfg := rest.CopyConfig(restCfg)
	cfg.WarningHandler, cfg.WarningHandlerWithContext = nil, warnings
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		id := fmt.Sprintf("%s %s", o.GetKind(), client.ObjectKeyFromObject(o))
		before := warnings.count()
		err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
			client.DryRunAll, client.ForceOwnership, client.FieldOwner("kray-e2e-install"))
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		for _, w := range warnings.since(before) {
			t.Errorf("%s: API warning: %s", id, w)
		}
		t.Logf("%s: accepted", id)
	}
}

// warningRecorder keeps the API server's warnings.
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warningRecorder) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.msgs)
}

func (w *warningRecorder) since(n int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs[n:]...)
}

// ensureNamespace creates ns when it does not exist and deletes it after the test if it created it.
func ensureNamespace(t *testing.T, ns string) {
	t.Helper()
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	err := k8s.Create(context.Background(), obj)
	switch {
	case apierrors.IsAlreadyExists(err):
	case err != nil:
		t.Fatal(err)
	default:
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
	}
}

// restrictPodSecurity makes the API server warn about, and refuse, anything in ns that the restricted Pod
// Security Standard forbids; for a Deployment it warns, which dryRunApply turns into a failure.
func restrictPodSecurity(t *testing.T, ns string) {
	t.Helper()
	obj := &corev1.Namespace{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: ns}, obj); err != nil {
		t.Fatal(err)
	}
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	for _, mode := range []string{"enforce", "warn"} {
		obj.Labels["pod-security.kubernetes.io/"+mode] = "restricted"
	}
	if err := k8s.Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// served reports whether the API server serves gvk.
func served(t *testing.T, gvk schema.GroupVersionKind) bool {
	t.Helper()
	_, err := k8s.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}
