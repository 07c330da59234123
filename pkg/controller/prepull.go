package controller

import (
	"context"
	"errors"
	"fmt"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
		errs = append(errs, r.createOnce(ctx, s, job, &kruisev1alpha1.ImagePullJob{}, constants.EventCreatedImagePullJob, constants.EventFailedToWriteImagePullJob))
	}
	for i := range live.Items {
		job := &live.Items[i]
		if wanted[job.Name] || !ownedBy(job, s.rc) || job.DeletionTimestamp != nil {
			continue
		}
		switch err := r.Writer.Delete(ctx, job, client.Preconditions{UID: &job.UID}); {
		case apierrors.IsNotFound(err):
		case err != nil:
			s.warn(constants.EventFailedToWriteImagePullJob, "Failed to delete ImagePullJob %s/%s: %v", job.Namespace, job.Name, err)
			errs = append(errs, fmt.Errorf("delete ImagePullJob %s: %w", job.Name, err))
		default:
			s.normal(constants.EventDeletedImagePullJob, "Deleted ImagePullJob %s/%s of image %s: the RayCluster no longer asks for it", job.Namespace, job.Name, job.Spec.Image)
		}
	}
	return errors.Join(errs...)
}
