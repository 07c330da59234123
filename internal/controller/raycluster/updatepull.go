package raycluster

import (
	"context"
	"fmt"
	"slices"
	"strings"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/imageref"
	"github.com/kray-project/kray/pkg/names"
	"github.com/kray-project/kray/pkg/nodeimage"
	"github.com/kray-project/kray/pkg/spec"
)

// imageUpdate is a worker group's RollingUpdate that gives its pods a new Ray image: the image, and the nodes
// of the group's pods that run another one.
type imageUpdate struct {
	image string
	nodes []string
}

// findImageUpdates are the worker groups, by name, whose live CloneSet has pods that a RollingUpdate gives
// another Ray image: scheduled pods, neither ended nor being deleted, whose Ray container runs an image other
// than the group's spec names.
func (s *state) findImageUpdates() map[string]imageUpdate {
	if !spec.Rolling(s.effective) {
		return nil
	}
	updates := map[string]imageUpdate{}
	for i := range s.effective.Spec.WorkerGroupSpecs {
		group := &s.effective.Spec.WorkerGroupSpecs[i]
		image := rayImage(&group.Template.Spec)
		if image == "" || s.children.cloneSet(names.WorkerCloneSet(s.rc.Name, group.GroupName)) == nil {
			continue
		}
		var nodes []string
		for _, p := range s.children.groupPods(s.rc, group.GroupName) {
			if p.DeletionTimestamp != nil || p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded ||
				p.Status.Phase == corev1.PodFailed || rayImage(&p.Spec) == image || slices.Contains(nodes, p.Spec.NodeName) {
				continue
			}
			nodes = append(nodes, p.Spec.NodeName)
		}
		if len(nodes) > 0 {
			slices.Sort(nodes)
			updates[group.GroupName] = imageUpdate{image: image, nodes: nodes}
		}
	}
	return updates
}

// rayImage is the image of the Ray container of a pod spec, empty when it has none.
func rayImage(p *corev1.PodSpec) string {
	if len(p.Containers) <= constants.RayContainerIndex {
		return ""
	}
	return p.Containers[constants.RayContainerIndex].Image
}

// updatePullJobs are the ImagePullJobs that pull the new images of the cluster's RollingUpdates before they
// reach the pods (UpdateImagePullJob), unless kray.io/image-prepull already keeps every Ray image pulled or
// turns this off.
func (s *state) updatePullJobs() []*kruisev1alpha1.ImagePullJob {
	if spec.ImagePrepull(s.effective) || !spec.PullsBeforeUpdate(s.effective) {
		return nil
	}
	var jobs []*kruisev1alpha1.ImagePullJob
	for i := range s.effective.Spec.WorkerGroupSpecs {
		group := &s.effective.Spec.WorkerGroupSpecs[i]
		if u, ok := s.imageUpdates[group.GroupName]; ok {
			jobs = append(jobs, builder.UpdateImagePullJob(s.effective, group, u.image))
		}
	}
	return jobs
}

// keepPullJob records job as the cluster's pull of its image, the one a group's update waits for. A job
// created by this reconcile counts from now.
func (r *Reconciler) keepPullJob(s *state, job *kruisev1alpha1.ImagePullJob) {
	if s.pullJobs == nil {
		s.pullJobs = map[string]*kruisev1alpha1.ImagePullJob{}
	}
	if job.CreationTimestamp.IsZero() {
		job = job.DeepCopy()
		job.CreationTimestamp = metav1.NewTime(r.now().Time)
	}
	if kept, ok := s.pullJobs[job.Spec.Image]; !ok || job.CreationTimestamp.Before(&kept.CreationTimestamp) {
		s.pullJobs[job.Spec.Image] = job
	}
}

// pullsFirst reports whether the RollingUpdate of group waits, its CloneSet paused, for its new Ray image to be
// on the nodes of its pods, so that no pod is held (not ready) or restarted while the image is pulled: while
// one of those nodes awaits it (nodeimage.Awaited), and at most builder.UpdatePullDeadline from the creation
// of the cluster's ImagePullJob for the image. Nothing is waited for without such a job (kray.io/image-prepull
// "false", or the job was refused). A NodeImage that cannot be read holds the group for this reconcile, and is
// returned as an error.
func (r *Reconciler) pullsFirst(ctx context.Context, s *state, group *rayv1.WorkerGroupSpec) (bool, error) {
	u, ok := s.imageUpdates[group.GroupName]
	if !ok || !spec.PullsBeforeUpdate(s.effective) {
		return false, nil
	}
	job := s.pullJobs[u.image]
	name, tag, named := imageref.NameTag(u.image)
	now := r.now().Time
	if job == nil || !named || !now.Before(job.CreationTimestamp.Add(builder.UpdatePullDeadline)) {
		return false, nil
	}
	for _, node := range u.nodes {
		ni, err := r.nodeImage(ctx, s, node)
		if err != nil {
			return true, fmt.Errorf("read NodeImage %s to see whether worker group %s's new image is there: %w", node, group.GroupName, err)
		}
		if nodeimage.Awaited(ni, name, tag, now, job.Status.CompletionTime == nil) {
			return true, nil
		}
	}
	return false, nil
}

// announcePull queues the event of a group whose update starts waiting for its image, once: when its live
// CloneSet is not paused yet.
func (s *state) announcePull(group *rayv1.WorkerGroupSpec, live *kruisev1alpha1.CloneSet) {
	if live == nil || live.Spec.UpdateStrategy.Paused {
		return
	}
	u := s.imageUpdates[group.GroupName]
	s.normal(EventAwaitingImage, "Worker group %s: its pods are updated in place once image %s is on the nodes they run on (%s), at most %s after ImagePullJob %s began pulling it",
		group.GroupName, u.image, strings.Join(u.nodes, ", "), builder.UpdatePullDeadline, s.pullJobs[u.image].Name)
}
