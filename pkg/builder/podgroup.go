package builder

import (
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedv1alpha1 "github.com/kray-project/kray/api/schedulerplugins/v1alpha1"
	rayv1 "github.com/kray-project/kray/api/v1"
	volcanov1beta1 "github.com/kray-project/kray/api/volcano/v1beta1"
	"github.com/kray-project/kray/pkg/batchscheduler"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/spec"
)

// PodGroup is the PodGroup a cluster's gang is scheduled by, named as KubeRay names it
// (batchscheduler.Scheduling.PodGroupName) and sized by the pods the cluster wants now: scheduler-plugins'
// for its gangs, Volcano's for every cluster. It is nil when the scheduler needs none, or while the
// cluster is suspended: a suspended cluster holds no place in the scheduler's queue.
func PodGroup(rc *rayv1.RayCluster, s batchscheduler.Scheduling) client.Object {
	name := s.PodGroupName(rc)
	if name == "" || spec.ClusterSuspended(rc) {
		return nil
	}
	meta := objectMeta(rc, name, map[string]string{constants.LabelCluster: rc.Name})
	switch s.Scheduler {
	case batchscheduler.SchedulerPlugins:
		return &schedv1alpha1.PodGroup{
			TypeMeta:   metav1.TypeMeta{APIVersion: schedv1alpha1.GroupVersion.String(), Kind: "PodGroup"},
			ObjectMeta: meta,
			Spec: schedv1alpha1.PodGroupSpec{
				MinMember:    batchscheduler.MinMember(rc),
				MinResources: batchscheduler.MinResources(rc),
			},
		}
	case batchscheduler.Volcano:
		members, resources := batchscheduler.VolcanoSize(rc)
		// A K8sJobMode RayJob's submitter is reserved for, not counted as a member.
		resources = batchscheduler.Sum(resources, batchscheduler.ParseResources(rc.Annotations[constants.AnnotationSubmitterResources]))
		pg := &volcanov1beta1.PodGroup{
			TypeMeta:   metav1.TypeMeta{APIVersion: volcanov1beta1.GroupVersion.String(), Kind: "PodGroup"},
			ObjectMeta: meta,
			Spec: volcanov1beta1.PodGroupSpec{
				MinMember:         members,
				MinResources:      resources,
				Queue:             rc.Labels[batchscheduler.LabelVolcanoQueue],
				PriorityClassName: rc.Labels[batchscheduler.LabelPriorityClassName],
			},
		}
		if mode, ok := rc.Labels[batchscheduler.LabelNetworkTopologyMode]; ok {
			pg.Spec.NetworkTopology = &volcanov1beta1.NetworkTopologySpec{Mode: mode}
			// Validation refuses a tier that is not an integer.
			if tier, err := strconv.Atoi(rc.Labels[batchscheduler.LabelNetworkTopologyHighestTier]); err == nil {
				pg.Spec.NetworkTopology.HighestTierAllowed = &tier
			}
		}
		return pg
	}
	return nil
}
