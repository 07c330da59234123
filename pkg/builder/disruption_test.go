package builder_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
)

// The head's disruption budget exists only on request, selects exactly the head the head StatefulSet makes,
// refuses every eviction of a ready head and lets an unready one go.
func TestHeadDisruptionBudget(t *testing.T) {
	rc := load(t, "testdata/minimal.input.yaml")
	if pdb := builder.HeadDisruptionBudget(rc); pdb != nil {
		t.Fatalf("a budget without the annotation: %+v", pdb)
	}
	rc.Annotations = map[string]string{constants.AnnotationHeadDisruptionBudget: "true"}
	pdb := builder.HeadDisruptionBudget(rc)
	if pdb == nil {
		t.Fatal("no budget with the annotation")
	}
	if pdb.Name != rc.Name+"-head-pdb" || pdb.Namespace != rc.Namespace || pdb.Labels[constants.LabelCluster] != rc.Name {
		t.Errorf("meta %s/%s labels %v", pdb.Namespace, pdb.Name, pdb.Labels)
	}
	if ref := pdb.OwnerReferences[0]; ref.Kind != "RayCluster" || ref.Name != rc.Name || ref.Controller == nil || !*ref.Controller {
		t.Errorf("owner %+v, want the RayCluster as controller", ref)
	}
	if diff := cmp.Diff(builder.HeadSelector(rc), pdb.Spec.Selector.MatchLabels); diff != "" {
		t.Errorf("selector (-head +budget):\n%s", diff)
	}
	sts := builder.HeadStatefulSet(rc, builder.Options{})
	for k, v := range pdb.Spec.Selector.MatchLabels {
		if sts.Spec.Template.Labels[k] != v {
			t.Errorf("the head pod's label %s is %q, the budget selects %q", k, sts.Spec.Template.Labels[k], v)
		}
	}
	if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(0) || pdb.Spec.MinAvailable != nil {
		t.Errorf("maxUnavailable %v minAvailable %v, want 0 and unset", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
	}
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
		t.Errorf("unhealthyPodEvictionPolicy %v, want AlwaysAllow", p)
	}
}
