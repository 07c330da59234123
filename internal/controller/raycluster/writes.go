package raycluster

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/shared"
	"github.com/kray-project/kray/pkg/constants"
)

// create creates obj and reports whether this call created it. An AlreadyExists answer (another writer,
// such as a second operator instance, won the race) is success without a creation, not an error.
func (r *Reconciler) create(ctx context.Context, obj client.Object) (bool, error) {
	switch err := r.Writer.Create(ctx, obj); {
	case err == nil:
		return true, nil
	case apierrors.IsAlreadyExists(err):
		return false, nil
	default:
		return false, err
	}
}

// createIfMissing creates obj unless an object with its name exists, which it reads into existing (from the
// cache, or from the API server when the create finds one the cache does not hold yet); it never updates.
// It reports whether it created obj. KubeRay treats Services and the autoscaler's RBAC the same way.
func (r *Reconciler) createIfMissing(ctx context.Context, obj client.Object, existing client.Object) (bool, error) {
	key := client.ObjectKeyFromObject(obj)
	switch err := r.Cache.Get(ctx, key, existing); {
	case err == nil:
		return false, nil
	case !apierrors.IsNotFound(err):
		return false, err
	}
	made, err := r.create(ctx, obj)
	if err == nil && !made {
		err = r.APIReader.Get(ctx, key, existing)
	}
	return made, err
}

// createOnce creates obj if missing and queues a Normal event (created) on creation, a Warning (failed) on
// failure. An existing object of obj's name is used only when this RayCluster controls it: one that someone
// else made is neither used nor changed, and is a failure, so a RayCluster named after another's Role, say,
// never binds that Role. Only an object kray makes without an owner (a retained GCS claim, meant to outlive
// its cluster) is found again by name alone.
func (r *Reconciler) createOnce(ctx context.Context, s *state, obj, existing client.Object, created, failed string) error {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	made, err := r.createIfMissing(ctx, obj, existing)
	if err == nil && !made && metav1.GetControllerOf(obj) != nil && !ownedBy(existing, s.rc) {
		err = notOwnedError(kind, obj.GetName())
	}
	if err != nil {
		s.warn(failed, "Failed to create %s %s/%s: %v", kind, obj.GetNamespace(), obj.GetName(), err)
		return fmt.Errorf("create %s %s: %w", kind, obj.GetName(), err)
	}
	if made {
		s.normal(created, "Created %s %s/%s", kind, obj.GetNamespace(), obj.GetName())
	}
	return nil
}

// updateFresh reads the latest version of obj from the API server (not the cache), lets mutate change it,
// and updates it when mutate reports a change, retrying from a fresh read on conflict. The update carries
// the read's resourceVersion, so it never overwrites a write it did not see.
func (r *Reconciler) updateFresh(ctx context.Context, key types.NamespacedName, obj client.Object, mutate func() (bool, error)) (bool, error) {
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.APIReader.Get(ctx, key, obj); err != nil {
			return err
		}
		var err error
		if changed, err = mutate(); err != nil || !changed {
			return err
		}
		return r.Writer.Update(ctx, obj)
	})
	return changed, err
}

// deletePod deletes exactly the pod that was observed: the UID precondition keeps a replacement that reused
// the name (the head pod always does) from being deleted by mistake. NotFound is success.
func (r *Reconciler) deletePod(ctx context.Context, obj client.Object) error {
	uid := obj.GetUID()
	err := r.Writer.Delete(ctx, obj, client.Preconditions{UID: &uid})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// deleteUnwanted deletes obj, an object of kind that the cluster no longer asks for (why says so), when the
// RayCluster controls it and it is not already going; the UID precondition spares a replacement of the same
// name. It queues the deleted event, or the failed one with the returned error.
func (r *Reconciler) deleteUnwanted(ctx context.Context, s *state, obj client.Object, kind, deleted, failed, why string) error {
	if !ownedBy(obj, s.rc) || obj.GetDeletionTimestamp() != nil {
		return nil
	}
	uid := obj.GetUID()
	switch err := r.Writer.Delete(ctx, obj, client.Preconditions{UID: &uid}); {
	case apierrors.IsNotFound(err):
	case err != nil:
		s.warn(failed, "Failed to delete %s %s/%s: %v", kind, obj.GetNamespace(), obj.GetName(), err)
		return fmt.Errorf("delete %s %s: %w", kind, obj.GetName(), err)
	default:
		s.normal(deleted, "Deleted %s %s/%s: %s", kind, obj.GetNamespace(), obj.GetName(), why)
	}
	return nil
}

// ownedBy reports whether rc is obj's controller; kray never adopts or changes objects it does not own.
func ownedBy(obj metav1.Object, rc *rayv1.RayCluster) bool { return shared.OwnedBy(obj, rc) }

// notOwnedError reports an object in the way that kray did not create.
func notOwnedError(kind, name string) error {
	return fmt.Errorf("%s %s exists and is not controlled by this RayCluster; rename or delete it", kind, name)
}

// patchPodMeta merge-patches the labels and annotations of the pod namespace/name.
func (r *Reconciler) patchPodMeta(ctx context.Context, namespace, name string, meta shared.Meta) error {
	return shared.PatchMeta(ctx, r.Writer, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}, meta)
}

// setAnnotation sets one annotation on obj.
// setSpecHash puts desired's spec hash on fresh, the workload read for an update that writes desired's spec,
// with the generation that update will have: the API server raises a generation by one per spec change.
func setSpecHash(fresh, desired client.Object) {
	setAnnotation(fresh, constants.AnnotationSpecHash, desired.GetAnnotations()[constants.AnnotationSpecHash])
	setAnnotation(fresh, constants.AnnotationSpecGeneration, strconv.FormatInt(fresh.GetGeneration()+1, 10))
}

func setAnnotation(obj client.Object, key, value string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	obj.SetAnnotations(a)
}
