package batchscheduler

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedv1alpha1 "github.com/kray-project/kray/api/schedulerplugins/v1alpha1"
	volcanov1beta1 "github.com/kray-project/kray/api/volcano/v1beta1"
)

// EmptyPodGroup is an empty object of the kind of PodGroup the batch scheduler uses, nil for none.
func EmptyPodGroup(scheduler string) client.Object {
	switch scheduler {
	case SchedulerPlugins:
		return &schedv1alpha1.PodGroup{}
	case Volcano:
		return &volcanov1beta1.PodGroup{}
	}
	return nil
}

// PodGroupVersion is the API group and version of the batch scheduler's PodGroups.
func PodGroupVersion(scheduler string) schema.GroupVersion {
	if scheduler == Volcano {
		return volcanov1beta1.GroupVersion
	}
	return schedv1alpha1.GroupVersion
}

// PodGroupSize is a PodGroup's member count and resources, the parts of it kray keeps up to date.
func PodGroupSize(pg client.Object) (int32, corev1.ResourceList) {
	switch pg := pg.(type) {
	case *schedv1alpha1.PodGroup:
		return pg.Spec.MinMember, pg.Spec.MinResources
	case *volcanov1beta1.PodGroup:
		return pg.Spec.MinMember, pg.Spec.MinResources
	}
	return 0, nil
}
