package builder

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/spec"
)

// HeadDisruptionBudget is the PodDisruptionBudget of rc's head when rc asks for one
// (kray.io/head-disruption-budget: "true"), else nil. With maxUnavailable 0 the API server refuses every
// eviction of a ready head, so a node drain waits for it instead of ending the Ray cluster's jobs; a head
// that is not ready may still be evicted (unhealthyPodEvictionPolicy AlwaysAllow), so a broken cluster never
// holds a drain forever.
func HeadDisruptionBudget(rc *rayv1.RayCluster) *policyv1.PodDisruptionBudget {
	if !spec.HeadDisruptionBudget(rc) {
		return nil
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: objectMeta(rc, names.HeadDisruptionBudget(rc.Name), map[string]string{
			constants.LabelCluster:  rc.Name,
			constants.LabelNodeType: constants.NodeTypeHead,
		}),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable:             ptr.To(intstr.FromInt32(0)),
			Selector:                   &metav1.LabelSelector{MatchLabels: HeadSelector(rc)},
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}
}
