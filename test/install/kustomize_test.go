package install

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
)

// config/default is what `kubectl apply --server-side -k config/default` installs: the CRD, the RBAC, and
// a hardened operator Deployment with a metrics Service, all namespaced objects in kray-system.
func TestKustomizeDefault(t *testing.T) {
	objs := kustomize(t, "default")
	got := kinds(objs)
	sort.Strings(got)
	want := []string{
		"ClusterRole", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition", "Deployment", "Namespace", "Role",
		"RoleBinding", "Service", "ServiceAccount",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("config/default kinds (-want +got):\n%s", diff)
	}
	if objs[0].GetKind() != "Namespace" || objs[0].GetName() != "kray-system" {
		t.Errorf("the first object is %s %s, want Namespace kray-system", objs[0].GetKind(), objs[0].GetName())
	}
	if objs[0].GetLabels()["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace kray-system does not enforce the restricted Pod Security Standard")
	}
	for _, o := range objs[1:] {
		switch o.GetKind() {
		case "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding":
		default:
			if o.GetNamespace() != "kray-system" {
				t.Errorf("%s %s is in namespace %q, want kray-system", o.GetKind(), o.GetName(), o.GetNamespace())
			}
		}
	}
	checkTyped(t, objs)
	d := deployment(t, objs)
	c := container(t, d)
	checkHardened(t, d)
	checkSelectors(t, objs, d)
	checkRBACWiring(t, objs, d)
	checkArgsAreFlags(t, c, operatorFlags(t))
	for _, name := range []string{"leader-elect", "metrics-bind-address", "health-probe-bind-address"} {
		if _, ok := arg(c.Args, name); !ok {
			t.Errorf("the Deployment does not pass --%s", name)
		}
	}
	if !hasPort(c, "metrics") {
		t.Errorf("the container declares no metrics port")
	}
}

// The leader election Role covers what the operator needs; once the leases marker leaves internal/controller/raycluster the
// ClusterRole no longer grants Leases cluster-wide and this Role is the only grant.
func TestLeaderElectionRole(t *testing.T) {
	objs := kustomize(t, "rbac")
	var role rbacv1.Role
	typed(t, find(t, objs, "Role"), &role)
	if role.Namespace != "kray-system" {
		t.Errorf("leader election Role in %q, want kray-system", role.Namespace)
	}
	// client-go's Lease lock reads, creates and updates its Lease, nothing else.
	want := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}}}
	if diff := cmp.Diff(want, role.Rules); diff != "" {
		t.Errorf("leader election Role rules (-want +got):\n%s", diff)
	}
}

// config/prometheus's ServiceMonitor scrapes config/default's metrics Service.
func TestPrometheusMonitorSelectsMetricsService(t *testing.T) {
	monitors := kustomize(t, "prometheus")
	if diff := cmp.Diff([]string{"ServiceMonitor"}, kinds(monitors)); diff != "" {
		t.Fatalf("config/prometheus kinds (-want +got):\n%s", diff)
	}
	if got := monitors[0].GetAPIVersion(); got != "monitoring.coreos.com/v1" {
		t.Errorf("ServiceMonitor apiVersion %s", got)
	}
	checkMonitorSelects(t, monitors[0], find(t, kustomize(t, "default"), "Service"))
}

// config/default must not depend on optional CRDs: the ServiceMonitor stays in config/prometheus.
func TestKustomizeDefaultHasOnlyBuiltinKinds(t *testing.T) {
	for _, o := range kustomize(t, "default") {
		if _, err := scheme.New(o.GroupVersionKind()); err != nil {
			t.Errorf("%s %s (%s) is not a built-in kind", o.GetKind(), o.GetName(), o.GetAPIVersion())
		}
	}
}

// Every directory under config/ with a kustomization builds.
func TestEveryKustomizationBuilds(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(configDir, "*", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range dirs {
		dir := filepath.Base(filepath.Dir(k))
		names = append(names, dir)
		t.Run(dir, func(t *testing.T) { kustomize(t, dir) })
	}
	for _, required := range []string{"crd", "default", "manager", "prometheus", "rbac"} {
		if !slices.Contains(names, required) {
			t.Errorf("config/%s has no kustomization.yaml", required)
		}
	}
	if _, err := os.Stat(filepath.Join(configDir, "samples", "kustomization.yaml")); err == nil {
		t.Errorf("config/samples should stay a plain directory of manifests")
	}
}
