package install

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}()

// checkTyped converts every object of a kind the scheme knows into its Go type, rejecting unknown fields.
func checkTyped(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		out, err := scheme.New(o.GroupVersionKind())
		if err != nil {
			continue // not a built-in kind, e.g. a ServiceMonitor
		}
		typed(t, o, out)
	}
}

// checkSelectors checks that the Deployment selects its own pods and that every Service selects them and
// targets a named container port.
func checkSelectors(t *testing.T, objs []*unstructured.Unstructured, d *appsv1.Deployment) {
	t.Helper()
	podLabels := labels.Set(d.Spec.Template.Labels)
	if d.Spec.Selector == nil || !labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(podLabels) {
		t.Errorf("Deployment selector %v does not match its pod labels %v", d.Spec.Selector, podLabels)
	}
	c := container(t, d)
	for _, o := range objs {
		if o.GetKind() != "Service" {
			continue
		}
		var svc corev1.Service
		typed(t, o, &svc)
		if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
			t.Errorf("Service %s selector %v does not match the operator pods %v", svc.Name, svc.Spec.Selector, podLabels)
		}
		if svc.Namespace != d.Namespace {
			t.Errorf("Service %s is in %s, the Deployment in %s", svc.Name, svc.Namespace, d.Namespace)
		}
		for _, p := range svc.Spec.Ports {
			if !hasPort(c, p.TargetPort.String()) {
				t.Errorf("Service %s port %s targets %s, which the container does not declare", svc.Name, p.Name, p.TargetPort.String())
			}
		}
	}
}

// checkRBACWiring checks that the ClusterRole (when rendered) is bound to the Deployment's ServiceAccount,
// and that with --leader-elect a Role in the Lease's namespace lets that account manage Leases.
func checkRBACWiring(t *testing.T, objs []*unstructured.Unstructured, d *appsv1.Deployment) {
	t.Helper()
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: d.Spec.Template.Spec.ServiceAccountName, Namespace: d.Namespace}
	if o, _ := Find(objs, "ServiceAccount"); o != nil && (o.GetName() != sa.Name || o.GetNamespace() != sa.Namespace) {
		t.Errorf("ServiceAccount %s/%s is not the Deployment's %s/%s", o.GetNamespace(), o.GetName(), sa.Namespace, sa.Name)
	}
	for _, cr := range objs {
		// The metrics-reader role is for the scraper, not the operator.
		if cr.GetKind() != "ClusterRole" || strings.HasSuffix(cr.GetName(), "metrics-reader") {
			continue
		}
		if !bound(t, objs, "ClusterRoleBinding", "ClusterRole", cr.GetName(), "", sa) {
			t.Errorf("no ClusterRoleBinding binds ClusterRole %s to %s/%s", cr.GetName(), sa.Namespace, sa.Name)
		}
	}
	args := container(t, d).Args
	if _, elect := arg(args, "leader-elect"); !elect {
		return
	}
	ns, ok := arg(args, "leader-election-namespace")
	if !ok {
		ns = d.Namespace
	}
	var role *rbacv1.Role
	for _, o := range objs {
		if o.GetKind() == "Role" && o.GetNamespace() == ns {
			role = &rbacv1.Role{}
			typed(t, o, role)
		}
	}
	if role == nil {
		if cr, _ := Find(objs, "ClusterRole"); cr != nil { // RBAC is rendered, so it must cover the Lease
			t.Errorf("--leader-elect without a Role in namespace %s", ns)
		}
		return
	}
	if !grants(role.Rules, "coordination.k8s.io", "leases", "get", "create", "update") {
		t.Errorf("Role %s/%s does not grant get, create and update on leases", ns, role.Name)
	}
	if !bound(t, objs, "RoleBinding", "Role", role.Name, ns, sa) {
		t.Errorf("no RoleBinding in %s binds Role %s to %s/%s", ns, role.Name, sa.Namespace, sa.Name)
	}
}

// bound reports whether a binding of bindingKind in ns refers to roleKind/roleName and has subject sa.
func bound(t *testing.T, objs []*unstructured.Unstructured, bindingKind, roleKind, roleName, ns string, sa rbacv1.Subject) bool {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != bindingKind || o.GetNamespace() != ns {
			continue
		}
		var b rbacv1.RoleBinding // a ClusterRoleBinding has the same fields
		typed(t, o, &b)
		if b.RoleRef.Kind == roleKind && b.RoleRef.Name == roleName && slices.Contains(b.Subjects, sa) {
			return true
		}
	}
	return false
}

func grants(rules []rbacv1.PolicyRule, group, resource string, verbs ...string) bool {
	for _, v := range verbs {
		ok := false
		for _, r := range rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, v) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// checkMonitorSelects checks that a ServiceMonitor scrapes svc: its selector and namespace match, and each
// endpoint names one of svc's ports.
func checkMonitorSelects(t *testing.T, sm *unstructured.Unstructured, svc *unstructured.Unstructured) {
	t.Helper()
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(labels.Set(svc.GetLabels())) {
		t.Errorf("ServiceMonitor %s selector %v does not match Service %s labels %v", sm.GetName(), sel, svc.GetName(), svc.GetLabels())
	}
	namespaces, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
	if !slices.Contains(namespaces, svc.GetNamespace()) {
		t.Errorf("ServiceMonitor %s looks in namespaces %v, not %s", sm.GetName(), namespaces, svc.GetNamespace())
	}
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	var names []string
	for _, p := range ports {
		if m, ok := p.(map[string]any); ok {
			if n, ok := m["name"].(string); ok {
				names = append(names, n)
			}
		}
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) == 0 {
		t.Errorf("ServiceMonitor %s has no endpoints", sm.GetName())
	}
	for _, e := range endpoints {
		m, _ := e.(map[string]any)
		if port, _ := m["port"].(string); !slices.Contains(names, port) {
			t.Errorf("ServiceMonitor %s endpoint port %q is not a port of Service %s %v", sm.GetName(), port, svc.GetName(), names)
		}
	}
}
