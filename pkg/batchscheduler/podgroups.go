package batchscheduler

import (
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
