// Package v1 holds the ray.io/v1 API types that kray serves, schema-compatible with KubeRay's: RayCluster,
// RayJob, RayService and RayCronJob.
// +kubebuilder:object:generate=true
// +groupName=ray.io
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "ray.io", Version: "v1"}

	// SchemeGroupVersion is an alias of GroupVersion for code generated in the client-go style.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource returns the GroupResource of the named resource in this group.
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}
