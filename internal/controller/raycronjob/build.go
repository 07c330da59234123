package raycronjob

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

// JobName is the name of the RayJob cj starts for schedule time t, KubeRay's: cj's name and the minutes
// since the Unix epoch, so every start of the same time, by any operator instance, names the same RayJob.
func JobName(cj *rayv1.RayCronJob, t time.Time) string {
	return fmt.Sprintf("%s-%d", cj.Name, t.Unix()/60)
}

// RayJob is the RayJob cj starts for schedule time t: its job template, KubeRay's label and annotation, and
// cj as its controller (so deleting cj deletes it).
func RayJob(cj *rayv1.RayCronJob, t time.Time) *rayv1.RayJob {
	return &rayv1.RayJob{
		TypeMeta: metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayJob"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        JobName(cj, t),
			Namespace:   cj.Namespace,
			Labels:      map[string]string{constants.LabelCronJobName: cj.Name},
			Annotations: map[string]string{constants.AnnotationCronJobScheduledTimestamp: t.UTC().Format(time.RFC3339)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         rayv1.GroupVersion.String(),
				Kind:               "RayCronJob",
				Name:               cj.Name,
				UID:                cj.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: *cj.Spec.JobTemplate.DeepCopy(),
	}
}
