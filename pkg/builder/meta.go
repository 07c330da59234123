package builder

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// objectMeta is the metadata of an object kray owns: the cluster's namespace, the given labels, and a
// controller reference to the RayCluster so deletion cascades through the garbage collector.
func objectMeta(rc *rayv1.RayCluster, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       rc.Namespace,
		Labels:          labels,
		OwnerReferences: []metav1.OwnerReference{OwnerReference(rc)},
	}
}

// OwnerReference is the controller reference every kray-created object carries to its RayCluster.
func OwnerReference(rc *rayv1.RayCluster) metav1.OwnerReference {
	return *metav1.NewControllerRef(rc, rayv1.GroupVersion.WithKind("RayCluster"))
}
