package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodGroupSpec is what a gang needs before any of its pods is bound.
type PodGroupSpec struct {
	// MinMember is how many pods must be schedulable together.
	MinMember int32 `json:"minMember,omitempty"`
	// MinResources are the resources the gang needs in all.
	MinResources corev1.ResourceList `json:"minResources,omitempty"`
	// ScheduleTimeoutSeconds is how long a gang may wait for its members.
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`
}

// PodGroupStatus is what the scheduler reports of the gang.
type PodGroupStatus struct {
	Phase             string      `json:"phase,omitempty"`
	OccupiedBy        string      `json:"occupiedBy,omitempty"`
	Running           int32       `json:"running,omitempty"`
	Succeeded         int32       `json:"succeeded,omitempty"`
	Failed            int32       `json:"failed,omitempty"`
	ScheduleStartTime metav1.Time `json:"scheduleStartTime,omitempty"`
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
