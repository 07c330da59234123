package builder

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedv1alpha1 "github.com/kray-project/kray/api/schedulerplugins/v1alpha1"
	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/batchscheduler"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/spec"
)

// PodGroup is the scheduler-plugins PodGroup of a cluster whose pods are scheduled as one gang (named after
// the cluster, as KubeRay names it), sized by the pods the cluster wants now; nil when the cluster is not
// such a gang, or is suspended: a suspended cluster holds no place in the scheduler's queue.
func PodGroup(rc *rayv1.RayCluster, s batchscheduler.Scheduling) *schedv1alpha1.PodGroup {
	if !s.PodGroupNeeded() || spec.ClusterSuspended(rc) {
		return nil
	}
	return &schedv1alpha1.PodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: schedv1alpha1.GroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: objectMeta(rc, rc.Name, map[string]string{constants.LabelCluster: rc.Name}),
		Spec: schedv1alpha1.PodGroupSpec{
			MinMember:    batchscheduler.MinMember(rc),
			MinResources: batchscheduler.MinResources(rc),
		},
	}
}
