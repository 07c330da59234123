package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetworkTopologySpec is where in the network the gang's pods may be placed.
type NetworkTopologySpec struct {
	// Mode is "hard" or "soft".
	Mode string `json:"mode,omitempty"`
	// HighestTierAllowed is the highest tier of the network the gang may span.
	HighestTierAllowed *int `json:"highestTierAllowed,omitempty"`
}

// PodGroupSpec is what a gang needs before any of its pods is bound.
type PodGroupSpec struct {
	// MinMember is how many pods must be schedulable together.
	MinMember int32 `json:"minMember,omitempty"`
	// MinResources are the resources the gang needs in all.
	MinResources corev1.ResourceList `json:"minResources,omitempty"`
	// Queue is the Volcano queue the gang waits in ("default" when empty).
	Queue string `json:"queue,omitempty"`
	// PriorityClassName is the gang's priority.
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// NetworkTopology restricts where in the network the gang's pods go.
	NetworkTopology *NetworkTopologySpec `json:"networkTopology,omitempty"`
}

// PodGroupCondition is one condition the scheduler reports of the gang.
type PodGroupCondition struct {
	Type               string      `json:"type,omitempty"`
	Status             string      `json:"status,omitempty"`
	Reason             string      `json:"reason,omitempty"`
	Message            string      `json:"message,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// PodGroupStatus is what the scheduler reports of the gang.
type PodGroupStatus struct {
	Phase      string              `json:"phase,omitempty"`
	Conditions []PodGroupCondition `json:"conditions,omitempty"`
	Running    int32               `json:"running,omitempty"`
	Succeeded  int32               `json:"succeeded,omitempty"`
	Failed     int32               `json:"failed,omitempty"`
}

// PodGroup is a gang of pods scheduled all or nothing.
// +kubebuilder:object:root=true
type PodGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PodGroupSpec   `json:"spec,omitempty"`
	Status PodGroupStatus `json:"status,omitempty"`
}

// PodGroupList is a list of PodGroups.
// +kubebuilder:object:root=true
type PodGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodGroup `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PodGroup{}, &PodGroupList{})
}
