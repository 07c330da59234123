package builder_test

import (
	"testing"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
)

// Image pull jobs exist only on request: one per distinct Ray image, node selector and pull secrets among the
// head and the groups, each targeting the nodes that selector picks and never completing, named by content.
func TestImagePullJobs(t *testing.T) {
	rc := load(t, "testdata/minimal.input.yaml")
	if jobs := builder.ImagePullJobs(rc); jobs != nil {
		t.Fatalf("jobs without the annotation: %d", len(jobs))
	}
	rc.Annotations = map[string]string{constants.AnnotationImagePrepull: "true"}
	same := builder.ImagePullJobs(rc)
	headImage := rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image
	for i := range rc.Spec.WorkerGroupSpecs {
		rc.Spec.WorkerGroupSpecs[i].Template.Spec.Containers[0].Image = headImage
		rc.Spec.WorkerGroupSpecs[i].Template.Spec.NodeSelector = nil
	}
	rc.Spec.HeadGroupSpec.Template.Spec.NodeSelector = nil
	if jobs := builder.ImagePullJobs(rc); len(jobs) != 1 {
		t.Fatalf("head and workers share one image and no selector: %d jobs, want 1", len(jobs))
	}
	if len(same) == 0 {
		t.Fatal("no job with the annotation")
	}
	w := &rc.Spec.WorkerGroupSpecs[0].Template.Spec
	w.Containers[0].Image = "rayproject/ray:2.99.0-gpu"
	w.NodeSelector = map[string]string{"pool": "gpu"}
	w.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "b"}, {Name: "a"}}
	jobs := builder.ImagePullJobs(rc)
	if len(jobs) != 2 {
		t.Fatalf("%d jobs, want the head's and the gpu group's", len(jobs))
	}
	var gpu *kruisev1alpha1.ImagePullJob
	for _, j := range jobs {
		if j.Spec.Image == "rayproject/ray:2.99.0-gpu" {
			gpu = j
		}
		if j.Labels[constants.LabelCluster] != rc.Name || j.OwnerReferences[0].Name != rc.Name || j.Spec.CompletionPolicy.Type != kruisev1alpha1.Never {
			t.Errorf("job %s: labels %v owner %v completion %s", j.Name, j.Labels, j.OwnerReferences, j.Spec.CompletionPolicy.Type)
		}
	}
	if gpu == nil || gpu.Spec.Selector == nil || gpu.Spec.Selector.MatchLabels["pool"] != "gpu" {
		t.Fatalf("the gpu group's job does not target its nodes: %+v", gpu)
	}
	if len(gpu.Spec.PullSecrets) != 2 || gpu.Spec.PullSecrets[0] != "a" {
		t.Errorf("pull secrets %v, want [a b]", gpu.Spec.PullSecrets)
	}
	before := gpu.Name
	w.Containers[0].Image = "rayproject/ray:2.100.0-gpu"
	for _, j := range builder.ImagePullJobs(rc) {
		if j.Name == before {
			t.Errorf("a new image kept the job name %s: the old job would pull the new image's name", before)
		}
	}
	again := builder.ImagePullJobs(rc)
	if jobNames(again) != jobNames(builder.ImagePullJobs(rc)) {
		t.Errorf("names are not stable")
	}
}

func jobNames(jobs []*kruisev1alpha1.ImagePullJob) string {
	var out string
	for _, j := range jobs {
		out += j.Name + ","
	}
	return out
}

// An update's pull targets the nodes of the group's pods only, pulls on all of them at once, ends at a
// deadline, and is named by group, image and pull secrets.
func TestUpdateImagePullJob(t *testing.T) {
	rc := load(t, "testdata/minimal.input.yaml")
	group := &rc.Spec.WorkerGroupSpecs[0]
	group.Template.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "b"}, {Name: "a"}}
	job := builder.UpdateImagePullJob(rc, group, "rayproject/ray:2.52.0")
	if job.Spec.Image != "rayproject/ray:2.52.0" || job.Spec.Selector != nil || job.Spec.PodSelector == nil {
		t.Fatalf("image %s, node selector %v, pod selector %v", job.Spec.Image, job.Spec.Selector, job.Spec.PodSelector)
	}
	for k, v := range builder.WorkerSelector(rc, group.GroupName) {
		if job.Spec.PodSelector.MatchLabels[k] != v {
			t.Errorf("pod selector %v lacks %s=%s", job.Spec.PodSelector.MatchLabels, k, v)
		}
	}
	if c := job.Spec.CompletionPolicy; c.Type != kruisev1alpha1.Always || c.ActiveDeadlineSeconds == nil || *c.ActiveDeadlineSeconds != 600 {
		t.Errorf("completion policy %+v, want Always within 600 s", c)
	}
	if job.Labels[constants.LabelCluster] != rc.Name || job.Labels[constants.LabelGroup] != group.GroupName || job.OwnerReferences[0].Name != rc.Name {
		t.Errorf("labels %v, owners %v", job.Labels, job.OwnerReferences)
	}
	if len(job.Spec.PullSecrets) != 2 || job.Spec.PullSecrets[0] != "a" {
		t.Errorf("pull secrets %v, want [a b]", job.Spec.PullSecrets)
	}
	group.Replicas, group.MaxReplicas = ptr.To[int32](40), ptr.To[int32](40)
	if p := builder.UpdateImagePullJob(rc, group, "rayproject/ray:2.52.0").Spec.Parallelism.IntValue(); p != 40 {
		t.Errorf("parallelism %d for 40 pods, want 40: every node pulls at once", p)
	}
	if builder.UpdateImagePullJob(rc, group, "rayproject/ray:2.53.0").Name == job.Name {
		t.Error("a new image kept the job's name")
	}
	rc.Annotations = map[string]string{constants.AnnotationImagePrepull: "true"}
	for _, j := range builder.ImagePullJobs(rc) {
		if j.Name == job.Name {
			t.Errorf("the update's job and a kept image's job share the name %s", j.Name)
		}
	}
}
