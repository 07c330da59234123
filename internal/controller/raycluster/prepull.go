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

// reconcileImagePrepull keeps the cluster's ImagePullJobs: each one the RayCluster asks for
// (kray.io/image-prepull) and each one a RollingUpdate's new image needs (updatePullJobs) is created, and each
// one it controls but no longer needs (an image or node selector changed, the annotation removed, the update
// done) is deleted. Neither touches a pod. It runs before the workloads, whose update waits for these pulls.
func (r *Reconciler) reconcileImagePrepull(ctx context.Context, s *state) error {
	live := &kruisev1alpha1.ImagePullJobList{}
	if err := r.Cache.List(ctx, live, client.InNamespace(s.rc.Namespace), client.MatchingLabels{constants.LabelCluster: s.rc.Name}); err != nil {
		return fmt.Errorf("list ImagePullJobs: %w", err)
	}
	s.imageUpdates = s.findImageUpdates()
	wanted := map[string]bool{}
	var errs []error
	asked := builder.ImagePullJobs(s.effective)
	for i, job := range append(asked, s.updatePullJobs()...) {
		wanted[job.Name] = true
		existing := &kruisev1alpha1.ImagePullJob{}
		err := r.createOnce(ctx, s, job, existing, EventCreatedImagePullJob, EventFailedToWriteImagePullJob)
		switch {
		case err != nil && i < len(asked):
			errs = append(errs, err)
		case err != nil:
			// An update's own pull is not asked for: when Kruise refuses it (its ImagePullJobGate off), the
			// Warning says so and the update goes on without waiting, as it would without the pull.
		case existing.Name != "":
			r.keepPullJob(s, existing)
		default:
			r.keepPullJob(s, job)
		}
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
