// Package v1alpha1 is kray's own minimal copy of scheduler-plugins' scheduling.x-k8s.io/v1alpha1 PodGroup, the
// object its coscheduling plugin schedules gangs by: the fields kray writes and reads, so that kray does not
// depend on scheduler-plugins' module (whose Kubernetes libraries differ from kray's). The CRD is
// scheduler-plugins' own; kray generates none.
// +kubebuilder:object:generate=true
// +kubebuilder:skip
// +groupName=scheduling.x-k8s.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is scheduling.x-k8s.io/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: "scheduling.x-k8s.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
