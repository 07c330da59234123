package raycluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/imageref"
	"github.com/kray-project/kray/pkg/nodeimage"
	"github.com/kray-project/kray/pkg/spec"
)

// imagePoll is how often a held worker whose new image is being pulled onto its node is checked again.
const imagePoll = 2 * time.Second

// awaitsImage reports whether the drain of a worker held for an in-place update waits for the update's Ray image
// to be on the worker's node. With kray.io/image-prepull, whose ImagePullJob pulls every new image onto the
// group's nodes as soon as the spec changes, the worker keeps running its Ray node's tasks while the image comes,
// and is drained and restarted once it is there, so that its restart does not wait for a pull. It waits while
// Kruise's NodeImage of the node reports that tag neither pulled nor failed, at most timeout from the start of
// the hold, and only while a pull of that tag is queued on the node (the tag in the NodeImage's spec) or one of
// the cluster's ImagePullJobs for it runs and may still queue one: a node without a NodeImage (no kruise-daemon
// pulls there), or where no pull is asked or will be (the ImagePullJob was refused, or completed without that
// node), is not waited for.
func (r *Reconciler) awaitsImage(ctx context.Context, s *state, p *corev1.Pod, timeout time.Duration) (bool, error) {
	if !spec.ImagePrepull(s.effective) || p.Labels[constants.LabelKruiseLifecycleState] != constants.KruiseStatePreparingUpdate ||
		p.Spec.NodeName == "" {
		return false, nil
	}
	image := s.updateImage(p)
	name, tag, ok := imageref.NameTag(image)
	if !ok || image == p.Spec.Containers[constants.RayContainerIndex].Image {
		return false, nil
	}
	if held, err := time.Parse(time.RFC3339, p.Annotations[constants.AnnotationKruiseLifecycleTimestamp]); err != nil || !r.now().Time.Before(held.Add(timeout)) {
		return false, nil
	}
	ni, err := r.nodeImage(ctx, s, p.Spec.NodeName)
	if err != nil {
		return false, fmt.Errorf("read NodeImage %s to see whether worker pod %s's new image is there: %w", p.Spec.NodeName, p.Name, err)
	}
	pending, err := r.pullPending(ctx, s, image)
	if err != nil {
		return false, err
	}
	return nodeimage.Awaited(ni, name, tag, r.now().Time, pending), nil
}

// updateImage is the Ray image of the template of the pod's CloneSet, which an in-place update gives the pod;
// empty when the CloneSet is not in the snapshot.
func (s *state) updateImage(p *corev1.Pod) string {
	if cs := s.cloneSetOf(p); cs != nil && len(cs.Spec.Template.Spec.Containers) > constants.RayContainerIndex {
		return cs.Spec.Template.Spec.Containers[constants.RayContainerIndex].Image
	}
	return ""
}

// pullPending reports whether one of the cluster's ImagePullJobs (from the cache) pulls image and has not
// completed.
func (r *Reconciler) pullPending(ctx context.Context, s *state, image string) (bool, error) {
	jobs := &kruisev1alpha1.ImagePullJobList{}
	if err := r.Cache.List(ctx, jobs, client.InNamespace(s.rc.Namespace), client.MatchingLabels{constants.LabelCluster: s.rc.Name}); err != nil {
		return false, fmt.Errorf("list ImagePullJobs: %w", err)
	}
	return slices.ContainsFunc(jobs.Items, func(j kruisev1alpha1.ImagePullJob) bool {
		return j.Spec.Image == image && j.Status.CompletionTime == nil
	}), nil
}

// nodeImage is the NodeImage of the node named node, nil when it has none or the operator may not read it,
// read from the API server once per reconcile whatever the number of held workers on that node.
func (r *Reconciler) nodeImage(ctx context.Context, s *state, node string) (*kruisev1alpha1.NodeImage, error) {
	if ni, ok := s.nodeImages[node]; ok {
		return ni, nil
	}
	ni := &kruisev1alpha1.NodeImage{}
	switch err := r.APIReader.Get(ctx, client.ObjectKey{Name: node}, ni); {
	case apierrors.IsNotFound(err):
		ni = nil
	case apierrors.IsForbidden(err):
		// Not an error to retry: the rights will not come by themselves. Nothing is waited for.
		s.warn(EventNodeImagesForbidden, "Cannot read NodeImage %s, so workers held for an in-place update do not wait for kray.io/image-prepull's pulls: grant get on nodeimages.apps.kruise.io in a ClusterRole (a single-namespace install's Role cannot): %v", node, err)
		ni = nil
	case err != nil:
		return nil, err
	}
	if s.nodeImages == nil {
		s.nodeImages = map[string]*kruisev1alpha1.NodeImage{}
	}
	s.nodeImages[node] = ni
	return ni, nil
}
