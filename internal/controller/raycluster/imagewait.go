package raycluster

import (
	"context"
	"fmt"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/imageref"
	"github.com/kray-project/kray/pkg/spec"
)

// imagePoll is how often a held worker whose new image is being pulled onto its node is checked again.
const imagePoll = 2 * time.Second

// awaitsImage reports whether the drain of a worker held for an in-place update waits for the update's Ray image
// to be on the worker's node. With kray.io/image-prepull, whose ImagePullJob pulls every new image onto the
// group's nodes as soon as the spec changes, the worker keeps running its Ray node's tasks while the image comes,
// and is drained and restarted once it is there, so that its restart does not wait for a pull. It waits while
// Kruise's NodeImage of the node reports that tag neither pulled nor failed, at most timeout from the start of
// the hold; a node without a NodeImage (no kruise-daemon pulls there) is not waited for.
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
	ni := &kruisev1alpha1.NodeImage{}
	switch err := r.APIReader.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, ni); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read NodeImage %s to see whether worker pod %s's new image is there: %w", p.Spec.NodeName, p.Name, err)
	}
	for _, t := range ni.Status.ImageStatuses[name].Tags {
		if t.Tag == tag && (t.Phase == kruisev1alpha1.ImagePhaseSucceeded || t.Phase == kruisev1alpha1.ImagePhaseFailed) {
			return false, nil
		}
	}
	return true, nil
}

// updateImage is the Ray image of the template of the pod's CloneSet, which an in-place update gives the pod;
// empty when the CloneSet is not in the snapshot.
func (s *state) updateImage(p *corev1.Pod) string {
	if cs := s.cloneSetOf(p); cs != nil && len(cs.Spec.Template.Spec.Containers) > constants.RayContainerIndex {
		return cs.Spec.Template.Spec.Containers[constants.RayContainerIndex].Image
	}
	return ""
}
