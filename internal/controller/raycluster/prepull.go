package raycluster

import (
	"context"
	"errors"
	"fmt"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/constants"
)

// reconcileImagePrepull keeps the cluster's ImagePullJobs: each one the RayCluster asks for is created, and
// each one it controls but no longer asks for (an image or node selector changed, the annotation removed) is
// deleted. Neither touches a pod.
func (r *Reconciler) reconcileImagePrepull(ctx context.Context, s *state) error {
	live := &kruisev1alpha1.ImagePullJobList{}
	if err := r.Cache.List(ctx, live, client.InNamespace(s.rc.Namespace), client.MatchingLabels{constants.LabelCluster: s.rc.Name}); err != nil {
		return fmt.Errorf("list ImagePullJobs: %w", err)
	}
	wanted := map[string]bool{}
	var errs []error
	for _, job := range builder.ImagePullJobs(s.effective) {
		wanted[job.Name] = true
		errs = append(errs, r.createOnce(ctx, s, job, &kruisev1alpha1.ImagePullJob{}, EventCreatedImagePullJob, EventFailedToWriteImagePullJob))
	}
	for i := range live.Items {
		job := &live.Items[i]
		if wanted[job.Name] {
			continue
		}
		errs = append(errs, r.deleteUnwanted(ctx, s, job, "ImagePullJob", EventDeletedImagePullJob, EventFailedToWriteImagePullJob,
			"the RayCluster no longer asks for image "+job.Spec.Image+" to be pulled"))
	}
	return errors.Join(errs...)
}
