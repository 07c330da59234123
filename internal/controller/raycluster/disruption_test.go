package raycluster

import (
	"context"
	"slices"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

// The head's disruption budget follows the annotation on a running cluster: created when asked for, kept to
// kray's spec, deleted when the annotation goes; no pod is written either way.
func TestHeadDisruptionBudgetFollowsTheAnnotation(t *testing.T) {
	rc := cluster("c").group("g", 1).obj()
	e := newEnv(t, rc)
	e.converge(rc)
	e.updateSpec(rc, func(c *rayv1.RayCluster) {
		c.Annotations = map[string]string{constants.AnnotationHeadDisruptionBudget: "true"}
	})
	writes := e.mustReconcile(rc)
	if !slices.Contains(writes, "create PodDisruptionBudget/c-head-pdb") {
		t.Fatalf("writes %v lack the budget", writes)
	}
	for _, w := range writes {
		if w == "update Pod/c-head-0" || w == "patch Pod/c-head-0" || w == "delete Pod/c-head-0" {
			t.Errorf("turning the budget on wrote the head pod: %v", writes)
		}
	}
	if writes := e.mustReconcile(rc); len(writes) != 0 {
		t.Fatalf("writes %v once the budget is in place", writes)
	}
	pdb := e.get(&policyv1.PodDisruptionBudget{}, "c-head-pdb").(*policyv1.PodDisruptionBudget)
	pdb.Spec.UnhealthyPodEvictionPolicy = nil
	if err := e.api.Update(context.Background(), pdb); err != nil {
		t.Fatal(err)
	}
	if writes := e.mustReconcile(rc); !slices.Contains(writes, "update PodDisruptionBudget/c-head-pdb") {
		t.Errorf("writes %v: a changed budget is not brought back", writes)
	}
	e.updateSpec(rc, func(c *rayv1.RayCluster) { delete(c.Annotations, constants.AnnotationHeadDisruptionBudget) })
	writes = e.mustReconcile(rc)
	if !slices.Contains(writes, "delete PodDisruptionBudget/c-head-pdb") {
		t.Errorf("writes %v, want the budget deleted", writes)
	}
	for _, w := range writes {
		if w != "delete PodDisruptionBudget/c-head-pdb" && w != "status RayCluster/c" {
			t.Errorf("turning the budget off also wrote %s", w)
		}
	}
	if err := e.api.Get(context.Background(), objKey(rc), &rayv1.RayCluster{}); err != nil {
		t.Fatal(err)
	}
	if got := reasons(e.takeEvents()); !slices.Contains(got, EventCreatedPDB) || !slices.Contains(got, EventDeletedPDB) {
		t.Errorf("events %v lack %s and %s", got, EventCreatedPDB, EventDeletedPDB)
	}
}

// A budget of that name that the RayCluster does not control is neither taken nor deleted.
func TestSomeoneElsesHeadDisruptionBudgetIsLeftAlone(t *testing.T) {
	rc := cluster("c").group("g", 1).obj()
	theirs := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "c-head-pdb", Namespace: "ns", UID: "theirs",
		Labels: map[string]string{constants.LabelCluster: "c"}}}
	e := newEnv(t, rc, theirs)
	e.converge(rc)
	if err := e.api.Get(context.Background(), objKey(theirs), &policyv1.PodDisruptionBudget{}); apierrors.IsNotFound(err) {
		t.Fatalf("someone else's budget was deleted")
	}
	e.updateSpec(rc, func(c *rayv1.RayCluster) {
		c.Annotations = map[string]string{constants.AnnotationHeadDisruptionBudget: "true"}
	})
	if _, _, err := e.reconcile(rc); err == nil {
		t.Errorf("a budget of the same name that the cluster does not control is taken silently")
	}
}
