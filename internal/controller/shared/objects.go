package shared

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OwnedBy reports whether owner is obj's controller.
func OwnedBy(obj, owner metav1.Object) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == owner.GetUID()
}

// AddFinalizer adds finalizer to obj (as read; it is not changed) and reports whether it wrote.
func AddFinalizer(ctx context.Context, w Writer, obj client.Object, finalizer string) (bool, error) {
	if slices.Contains(obj.GetFinalizers(), finalizer) {
		return false, nil
	}
	return true, patchFinalizers(ctx, w, obj, append(slices.Clone(obj.GetFinalizers()), finalizer))
}

// RemoveFinalizer removes finalizer from obj (as read; it is not changed); an object already gone is
// success.
func RemoveFinalizer(ctx context.Context, w Writer, obj client.Object, finalizer string) error {
	if !slices.Contains(obj.GetFinalizers(), finalizer) {
		return nil
	}
	return patchFinalizers(ctx, w, obj, slices.DeleteFunc(slices.Clone(obj.GetFinalizers()), func(f string) bool { return f == finalizer }))
}

// patchFinalizers replaces metadata.finalizers with a merge patch under obj's resourceVersion, so a
// finalizer someone else added or removed meanwhile is never overwritten (the write fails with a Conflict).
func patchFinalizers(ctx context.Context, w Writer, obj client.Object, finalizers []string) error {
	cp := obj.DeepCopyObject().(client.Object)
	cp.SetFinalizers(finalizers)
	if err := client.IgnoreNotFound(w.Patch(ctx, cp, client.MergeFromWithOptions(obj, client.MergeFromWithOptimisticLock{}))); err != nil {
		return fmt.Errorf("write finalizers: %w", err)
	}
	return nil
}

// Meta is a JSON merge patch of an object's labels and annotations; a nil value removes the key.
type Meta struct {
	Labels      map[string]*string `json:"labels,omitempty"`
	Annotations map[string]*string `json:"annotations,omitempty"`
}

// PatchMeta merge-patches the labels and annotations of obj (only its kind, namespace and name are read),
// with no resourceVersion: kray owns the keys it patches. An object that is gone is not an error.
func PatchMeta(ctx context.Context, w Writer, obj client.Object, meta Meta) error {
	data, err := json.Marshal(map[string]Meta{"metadata": meta})
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(w.Patch(ctx, obj, client.RawPatch(types.MergePatchType, data)))
}

// NameSuffix is a random suffix of 5 lower-case letters and digits for the name of a new object, as the API
// server's generateName makes them.
func NameSuffix() string { return utilrand.String(5) }
