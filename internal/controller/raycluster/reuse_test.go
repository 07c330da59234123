package raycluster

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// foreign is an object of name that no RayCluster controls, labelled so the test can tell it unchanged.
func foreign(obj client.Object, name string) client.Object {
	obj.SetNamespace("ns")
	obj.SetName(name)
	obj.SetLabels(map[string]string{"team": "other"})
	obj.SetUID("uid-of-another")
	return obj
}

// An object kray would make under a name it derives from the cluster is used only when this RayCluster
// controls it. One that someone else made is neither used nor changed: the reconcile fails with an error
// saying so (the WorkloadsSynced condition), a Warning says so, and nothing that would rely on it is made:
// a RayCluster named after a Role must not get that Role bound to the autoscaler's ServiceAccount.
func TestObjectsOfTheClustersNamesMadeBySomeoneElseAreNotUsed(t *testing.T) {
	autoscaling := func(rc *rayv1.RayCluster) { rc.Spec.EnableInTreeAutoscaling = ptr.To(true) }
	for name, tc := range map[string]struct {
		mutate  func(*rayv1.RayCluster)
		obj     client.Object
		kind    string
		notMade []client.Object
	}{
		"Role": {autoscaling, foreign(&rbacv1.Role{Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}}}}, "c"),
			"Role", []client.Object{&rbacv1.RoleBinding{}}},
		"RoleBinding":    {autoscaling, foreign(&rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "c"}}, "c"), "RoleBinding", nil},
		"ServiceAccount": {autoscaling, foreign(&corev1.ServiceAccount{}, "c"), "ServiceAccount", []client.Object{&rbacv1.Role{}, &rbacv1.RoleBinding{}}},
		"head Service":   {nil, foreign(&corev1.Service{Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "other"}}}, names.HeadService("c")), "Service", nil},
		"Ingress": {func(rc *rayv1.RayCluster) { rc.Spec.HeadGroupSpec.EnableIngress = ptr.To(true) },
			foreign(&networkingv1.Ingress{}, names.HeadIngress("c")), "Ingress", nil},
		"PodDisruptionBudget": {func(rc *rayv1.RayCluster) {
			rc.Annotations = map[string]string{constants.AnnotationHeadDisruptionBudget: "true"}
		},
			foreign(&policyv1.PodDisruptionBudget{}, names.HeadDisruptionBudget("c")), "PodDisruptionBudget", nil},
	} {
		t.Run(name, func(t *testing.T) {
			f := cluster("c").group("g", 1)
			if tc.mutate != nil {
				f = f.with(tc.mutate)
			}
			rc := f.obj()
			e := newEnv(t, rc, tc.obj.DeepCopyObject().(client.Object))
			_, _, err := e.reconcile(rc)
			want := tc.kind + " " + tc.obj.GetName() + " exists and is not controlled by this RayCluster"
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("err = %v, want one saying %q", err, want)
			}
			if ev := strings.Join(e.takeEvents(), "\n"); !strings.Contains(ev, want) || !strings.Contains(ev, "Warning ") {
				t.Errorf("events:\n%s", ev)
			}
			live := tc.obj.DeepCopyObject().(client.Object)
			if err := e.api.Get(context.Background(), client.ObjectKeyFromObject(tc.obj), live); err != nil || live.GetLabels()["team"] != "other" || len(live.GetOwnerReferences()) != 0 {
				t.Errorf("the foreign %s changed: %v %+v", tc.kind, err, live)
			}
			for _, obj := range tc.notMade {
				if err := e.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: names.AutoscalerRBAC("c")}, obj); err == nil {
					t.Errorf("made %T %s beside the foreign %s", obj, obj.GetName(), tc.kind)
				}
			}
			got := &rayv1.RayCluster{}
			if err := e.api.Get(context.Background(), client.ObjectKeyFromObject(rc), got); err != nil {
				t.Fatal(err)
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, constants.ConditionWorkloadsSynced); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, want) {
				t.Errorf("condition %s: %+v", constants.ConditionWorkloadsSynced, c)
			}
		})
	}
}

// The rule holds when the cache has not seen the object yet: the create that finds it reads it from the API
// server. kray's own object, found the same way, is used as before.
func TestObjectsOfTheClustersNamesBehindTheCache(t *testing.T) {
	rc := cluster("c").group("g", 1).with(func(rc *rayv1.RayCluster) { rc.Spec.EnableInTreeAutoscaling = ptr.To(true) }).obj()
	role := foreign(&rbacv1.Role{}, "c")
	e := newEnv(t, rc, role)
	e.r.Cache = fakeAPI(rc.DeepCopy())
	if _, _, err := e.reconcile(rc); err == nil || !strings.Contains(err.Error(), "Role c exists and is not controlled by this RayCluster") {
		t.Errorf("a foreign Role behind the cache: err = %v", err)
	}
	if err := e.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "c"}, &rbacv1.RoleBinding{}); err == nil {
		t.Error("bound a foreign Role behind the cache")
	}

	role.SetOwnerReferences([]metav1.OwnerReference{builder.OwnerReference(rc)})
	e = newEnv(t, rc, role)
	e.r.Cache = fakeAPI(rc.DeepCopy())
	if _, _, err := e.reconcile(rc); err != nil {
		t.Errorf("the cluster's own Role behind the cache: %v", err)
	}
}
