package raycluster

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/pkg/spec"
)

// keepExtensionAnnotations copies kray's extension settings from the spec to the annotations that keep them
// (see pkg/spec/extensions.go), so that a client which drops the fields it does not know keeps the settings.
// It writes only metadata, with a merge patch under optimistic locking, and only when the copy differs.
func (r *Reconciler) keepExtensionAnnotations(ctx context.Context, s *state) error {
	want, err := spec.ExtensionAnnotations(s.rc)
	if err != nil || !spec.ExtensionAnnotationsDiffer(s.rc, want) {
		return nil // an unreadable annotation is reported by validation
	}
	cp := s.rc.DeepCopy()
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	for k, v := range want {
		if v == "" {
			delete(cp.Annotations, k)
		} else {
			cp.Annotations[k] = v
		}
	}
	if err := client.IgnoreNotFound(r.Writer.Patch(ctx, cp, client.MergeFromWithOptions(s.rc, client.MergeFromWithOptimisticLock{}))); err != nil {
		return fmt.Errorf("keep the extension settings in annotations: %w", err)
	}
	return nil
}
