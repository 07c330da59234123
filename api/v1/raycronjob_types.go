package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RayCronJobSpec is a cron schedule and the RayJob each of its times starts.
type RayCronJobSpec struct {
	// JobTemplate is the spec of every RayJob the schedule starts.
	JobTemplate RayJobSpec `json:"jobTemplate"`
	// Schedule is a standard five-field cron schedule (or a descriptor such as @hourly or @every 1h).
	Schedule string `json:"schedule"`
	// TimeZone is the IANA time zone the schedule is read in; unset is the operator's own time zone.
	// +kubebuilder:validation:MinLength=1
	// +optional
	TimeZone *string `json:"timeZone,omitempty"`
	// Suspend stops new RayJobs from being started; RayJobs already started are not affected.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`
}

// RayCronJobStatus is what the schedule has done.
type RayCronJobStatus struct {
	// LastScheduleTime is the schedule time of the last RayJob started (the tick, not the moment of the create).
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// Conditions say whether the schedule starts RayJobs (RayCronJobScheduling), and why not.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RayCronJobScheduling is True while a RayCronJob starts a RayJob at each time of its schedule, False while it
// is suspended or its spec is invalid (the reason says which, the message why).
const RayCronJobScheduling = "Scheduling"

// RayCronJob starts a RayJob at each time of a cron schedule.
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=all
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="schedule",type=string,JSONPath=".spec.schedule",priority=0
// +kubebuilder:printcolumn:name="timezone",type=string,JSONPath=".spec.timeZone",priority=0
// +kubebuilder:printcolumn:name="last schedule",type=date,JSONPath=".status.lastScheduleTime",priority=0
// +kubebuilder:printcolumn:name="age",type="date",JSONPath=".metadata.creationTimestamp",priority=0
// +kubebuilder:printcolumn:name="suspend",type=boolean,JSONPath=".spec.suspend",priority=0
type RayCronJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec RayCronJobSpec `json:"spec,omitempty"`
	// +optional
	Status RayCronJobStatus `json:"status,omitempty"`
}

// RayCronJobList is a list of RayCronJobs.
// +kubebuilder:object:root=true
type RayCronJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RayCronJob `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RayCronJob{}, &RayCronJobList{})
}
