package raycronjob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestRayJobOfAScheduleTime(t *testing.T) {
	cj := cronJob()
	cj.Labels = map[string]string{"team": "a"}
	cj.Annotations = map[string]string{"note": "x"}
	at := time.Date(2024, 1, 1, 8, 5, 0, 0, time.FixedZone("Asia/Taipei", 8*3600)) // 00:05 UTC
	job := RayJob(cj, at)
	want := metav1.ObjectMeta{
		Name:        "nightly-28401125", // minutes since the epoch, as KubeRay names it
		Namespace:   "ns",
		Labels:      map[string]string{"ray.io/cronjob-name": "nightly"},
		Annotations: map[string]string{"ray.io/cronjob-scheduled-timestamp": "2024-01-01T00:05:00Z"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCronJob", Name: "nightly", UID: "cj-uid",
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
	}
	if diff := cmp.Diff(want, job.ObjectMeta); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(cj.Spec.JobTemplate, job.Spec); diff != "" {
		t.Errorf("spec is not the job template (-template +spec):\n%s", diff)
	}
	job.Spec.RayClusterSpec.HeadGroupSpec.RayStartParams["x"] = "y"
	if _, ok := cj.Spec.JobTemplate.RayClusterSpec.HeadGroupSpec.RayStartParams["x"]; ok {
		t.Error("the RayJob shares its spec with the template")
	}
	if JobName(cj, at) == JobName(cj, at.Add(time.Minute)) || JobName(cj, at) != JobName(cj, at.Add(59*time.Second)) {
		t.Error("names are not one per minute")
	}
}
