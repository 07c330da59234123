package builder

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/spec"
)

// prepullParallelism is how many nodes an ImagePullJob pulls on at once (Kruise's default is 1).
const prepullParallelism = 10

// UpdatePullDeadline bounds the pull of a RollingUpdate's new image (UpdateImagePullJob): Kruise ends the job
// then, and the group's pods are updated whether or not the image arrived.
const UpdatePullDeadline = 10 * time.Minute

// pull is what one ImagePullJob keeps pulled, and where: the nodes NodeSelector picks, or those where Group's
// pods run.
type pull struct {
	Image        string            `json:"image"`
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	PullSecrets  []string          `json:"pullSecrets,omitempty"`
	Group        string            `json:"group,omitempty"`
}

// ImagePullJobs are the Kruise ImagePullJobs that keep rc's Ray images pulled on the nodes its groups can run
// on, when rc asks for it (kray.io/image-prepull: "true"), else nil: one per distinct Ray container image,
// pod nodeSelector and image pull secrets among the head and the worker groups, named by a hash of the three,
// so that a changed image makes a new job (the old one goes) and groups that share them share a job.
// completionPolicy Never keeps a job pulling onto nodes that join later, where an autoscaler scale-up would
// otherwise wait for a cold pull. The result is sorted by name.
func ImagePullJobs(rc *rayv1.RayCluster) []*kruisev1alpha1.ImagePullJob {
	if !spec.ImagePrepull(rc) {
		return nil
	}
	templates := []*corev1.PodTemplateSpec{&rc.Spec.HeadGroupSpec.Template}
	for i := range rc.Spec.WorkerGroupSpecs {
		templates = append(templates, &rc.Spec.WorkerGroupSpecs[i].Template)
	}
	byName := map[string]*kruisev1alpha1.ImagePullJob{}
	for _, t := range templates {
		if len(t.Spec.Containers) <= constants.RayContainerIndex || t.Spec.Containers[constants.RayContainerIndex].Image == "" {
			continue
		}
		p := pull{Image: t.Spec.Containers[constants.RayContainerIndex].Image, NodeSelector: t.Spec.NodeSelector}
		for _, s := range t.Spec.ImagePullSecrets {
			p.PullSecrets = append(p.PullSecrets, s.Name)
		}
		slices.Sort(p.PullSecrets)
		job := imagePullJob(rc, p)
		byName[job.Name] = job
	}
	var jobs []*kruisev1alpha1.ImagePullJob
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		jobs = append(jobs, byName[name])
	}
	return jobs
}

// UpdateImagePullJob is the ImagePullJob that pulls image, which a RollingUpdate gives the pods of group, onto
// the nodes where the group's pods run (its podSelector), all at once, before any of them is updated in place.
// It completes once every such node pulled it or failed to, or at UpdatePullDeadline; it is named by a hash
// of the group, the image and the pull secrets, so a changed image makes a new job.
func UpdateImagePullJob(rc *rayv1.RayCluster, group *rayv1.WorkerGroupSpec, image string) *kruisev1alpha1.ImagePullJob {
	p := pull{Image: image, Group: group.GroupName}
	for _, s := range group.Template.Spec.ImagePullSecrets {
		p.PullSecrets = append(p.PullSecrets, s.Name)
	}
	slices.Sort(p.PullSecrets)
	job := imagePullJob(rc, p)
	job.Labels[constants.LabelGroup] = group.GroupName
	job.Spec.Parallelism = ptr.To(intstr.FromInt32(max(prepullParallelism, spec.GroupReplicas(rc, group))))
	job.Spec.PodSelector = &kruisev1alpha1.ImagePullJobPodSelector{LabelSelector: metav1.LabelSelector{MatchLabels: WorkerSelector(rc, group.GroupName)}}
	job.Spec.CompletionPolicy = kruisev1alpha1.CompletionPolicy{
		Type:                  kruisev1alpha1.Always,
		ActiveDeadlineSeconds: ptr.To(int64(UpdatePullDeadline / time.Second)),
	}
	return job
}

// imagePullJob is the ImagePullJob of p.
func imagePullJob(rc *rayv1.RayCluster, p pull) *kruisev1alpha1.ImagePullJob {
	key, _ := json.Marshal(p) // maps marshal with sorted keys, so equal pulls give equal keys
	sum := sha256.Sum256(key)
	job := &kruisev1alpha1.ImagePullJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kruisev1alpha1.GroupVersion.String(), Kind: "ImagePullJob"},
		ObjectMeta: objectMeta(rc, names.ImagePullJob(rc.Name, hex.EncodeToString(sum[:])[:10]), map[string]string{constants.LabelCluster: rc.Name}),
		Spec: kruisev1alpha1.ImagePullJobSpec{
			Image: p.Image,
			ImagePullJobTemplate: kruisev1alpha1.ImagePullJobTemplate{
				PullSecrets:      p.PullSecrets,
				Parallelism:      ptr.To(intstr.FromInt32(prepullParallelism)),
				CompletionPolicy: kruisev1alpha1.CompletionPolicy{Type: kruisev1alpha1.Never},
			},
		},
	}
	if len(p.NodeSelector) > 0 {
		job.Spec.Selector = &kruisev1alpha1.ImagePullJobNodeSelector{LabelSelector: metav1.LabelSelector{MatchLabels: p.NodeSelector}}
	}
	return job
}
