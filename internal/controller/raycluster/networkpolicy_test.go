package raycluster

import (
	"context"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/features"
	"github.com/kray-project/kray/pkg/validation"
)

// gatedEnv is an env whose API server holds objs and whose operator validates with the feature gates of spec
// on ("Name=true,...").
func gatedEnv(t *testing.T, spec string, objs ...client.Object) *env {
	t.Helper()
	e := newEnv(t, objs...)
	gates := features.New()
	if err := (features.Flag{Gate: gates}).Set(spec); err != nil {
		t.Fatal(err)
	}
	e.r.Validation = validation.ClusterOptions{Gates: gates}
	return e
}

// networkPolicyEnv is an env whose API server holds objs and whose operator serves spec.networkPolicy.
func networkPolicyEnv(t *testing.T, objs ...client.Object) *env {
	t.Helper()
	e := gatedEnv(t, "RayClusterNetworkPolicy=true", objs...)
	e.r.NetworkPolicies = true
	return e
}

// onlyNetworkPolicyWrites fails when writes holds anything but NetworkPolicy writes and the status.
func onlyNetworkPolicyWrites(t *testing.T, writes []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(writes, w) {
			t.Errorf("writes %v lack %s", writes, w)
		}
	}
	for _, w := range writes {
		if !slices.Contains(want, w) && w != "status RayCluster/c" {
			t.Errorf("writes %v: %s too", writes, w)
		}
	}
}

// The policies follow spec.networkPolicy on a running cluster: one per group and the head's, kept to the
// spec, a removed group's deleted, all deleted once the field goes; no pod is written for any of it.
func TestNetworkPoliciesFollowTheSpec(t *testing.T) {
	rc := cluster("c").group("g", 1).group("h", 1).with(func(rc *rayv1.RayCluster) {
		rc.Spec.NetworkPolicy = &rayv1.NetworkPolicyConfig{}
	}).obj()
	e := networkPolicyEnv(t, rc)
	e.converge(rc)
	for _, name := range []string{"c-head", "c-workers-g", "c-workers-h"} {
		p := e.get(&networkingv1.NetworkPolicy{}, name).(*networkingv1.NetworkPolicy)
		if !ownedBy(p, e.get(&rayv1.RayCluster{}, "c").(*rayv1.RayCluster)) {
			t.Errorf("%s is not controlled by the cluster", name)
		}
	}
	if got := reasons(e.takeEvents()); !slices.Contains(got, EventCreatedNetworkPolicy) {
		t.Errorf("events %v lack %s", got, EventCreatedNetworkPolicy)
	}
	if writes := e.mustReconcile(rc); len(writes) != 0 {
		t.Fatalf("writes %v once the policies are in place", writes)
	}

	// Someone opens the head's policy: it is brought back.
	p := e.get(&networkingv1.NetworkPolicy{}, "c-head").(*networkingv1.NetworkPolicy)
	p.Spec.Ingress = append(p.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
	if err := e.api.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	onlyNetworkPolicyWrites(t, e.mustReconcile(rc), "update NetworkPolicy/c-head")

	// A mode change updates every policy in place.
	e.updateSpec(rc, func(c *rayv1.RayCluster) {
		c.Spec.NetworkPolicy.Mode = ptr.To(rayv1.NetworkPolicyDenyAllIngress)
	})
	onlyNetworkPolicyWrites(t, e.mustReconcile(rc), "update NetworkPolicy/c-head", "update NetworkPolicy/c-workers-g", "update NetworkPolicy/c-workers-h")
	p = e.get(&networkingv1.NetworkPolicy{}, "c-workers-g").(*networkingv1.NetworkPolicy)
	if !slices.Equal(p.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || p.Spec.Egress != nil {
		t.Errorf("DenyAllIngress policy: types %v, egress %v", p.Spec.PolicyTypes, p.Spec.Egress)
	}

	// A removed group's policy goes with it.
	e.updateSpec(rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs = c.Spec.WorkerGroupSpecs[:1] })
	if writes := e.mustReconcile(rc); !slices.Contains(writes, "delete NetworkPolicy/c-workers-h") {
		t.Errorf("writes %v: the removed group's policy stays", writes)
	}

	// No networkPolicy, no policies.
	e.updateSpec(rc, func(c *rayv1.RayCluster) { c.Spec.NetworkPolicy = nil })
	onlyNetworkPolicyWrites(t, e.mustReconcile(rc), "delete NetworkPolicy/c-head", "delete NetworkPolicy/c-workers-g")
	if got := reasons(e.takeEvents()); !slices.Contains(got, EventDeletedNetworkPolicy) {
		t.Errorf("events %v lack %s", got, EventDeletedNetworkPolicy)
	}
}

// A policy of that name that the cluster does not control is neither taken, nor changed, nor deleted: the
// collision is reported with KubeRay's reason, and the cluster's other policies are still written.
func TestSomeoneElsesNetworkPolicyIsLeftAlone(t *testing.T) {
	theirs := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "c-head", Namespace: "ns", UID: "theirs",
		Labels: map[string]string{constants.LabelCluster: "c"}}}
	rc := cluster("c").group("g", 1).with(func(rc *rayv1.RayCluster) {
		rc.Spec.NetworkPolicy = &rayv1.NetworkPolicyConfig{}
	}).obj()
	e := networkPolicyEnv(t, rc, theirs)
	if _, _, err := e.reconcile(rc); err == nil {
		t.Errorf("a policy of the same name that the cluster does not control is taken silently")
	}
	if got := reasons(e.takeEvents()); !slices.Contains(got, EventNetworkPolicyNameCollision) {
		t.Errorf("events %v lack %s", got, EventNetworkPolicyNameCollision)
	}
	got := e.get(&networkingv1.NetworkPolicy{}, "c-head").(*networkingv1.NetworkPolicy)
	if got.UID != "theirs" || len(got.Spec.PolicyTypes) != 0 {
		t.Errorf("someone else's policy was changed: %+v", got.Spec)
	}
	e.get(&networkingv1.NetworkPolicy{}, "c-workers-g")
	e.updateSpec(rc, func(c *rayv1.RayCluster) { c.Spec.NetworkPolicy = nil })
	_, _, _ = e.reconcile(rc)
	if err := e.api.Get(context.Background(), objKey(theirs), &networkingv1.NetworkPolicy{}); apierrors.IsNotFound(err) {
		t.Fatalf("someone else's policy was deleted")
	}
}
