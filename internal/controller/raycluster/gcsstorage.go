package raycluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/kray-project/kray/pkg/builder"
)

// reconcileGCSStoragePVC creates the embedded GCS store's PVC once; the head pod mounts it.
func (r *Reconciler) reconcileGCSStoragePVC(ctx context.Context, s *state) error {
	pvc := builder.GCSStoragePVC(s.effective)
	if pvc == nil {
		return nil
	}
	return r.createOnce(ctx, s, pvc, &corev1.PersistentVolumeClaim{}, EventCreatedPVC, EventFailedToCreatePVC)
}
