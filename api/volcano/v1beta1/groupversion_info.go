// Package v1beta1 is kray's own minimal copy of Volcano's scheduling.volcano.sh/v1beta1 PodGroup, the object
// Volcano's scheduler schedules gangs by: the fields kray writes and reads, so that kray does not depend on
// Volcano's modules. The CRD is Volcano's own; kray generates none.
// +kubebuilder:object:generate=true
// +kubebuilder:skip
// +groupName=scheduling.volcano.sh
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is scheduling.volcano.sh/v1beta1.
	GroupVersion = schema.GroupVersion{Group: "scheduling.volcano.sh", Version: "v1beta1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
