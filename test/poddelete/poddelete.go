// Package poddelete plays the kubelet's last step for the local cluster's kwok nodes: a pod that is being
// deleted is removed from the API server as a kubelet removes it once its containers have stopped, with a
// grace period of 0 and a precondition on the pod's UID.
//
// kwok's own `delete` stage removes a pod by name only. A request it queued for a pod that is gone by then
// removes a newer pod of the same name, such as the `<cluster>-head-0` an Advanced StatefulSet creates as soon
// as the old one is gone. A kubelet never does that, so the local cluster must not either.
package poddelete

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Workers is how many deletions run at once.
const Workers = 4

// target is one run of a pod: a pod of the same name and another UID is another target.
type target struct {
	namespace, name string
	uid             types.UID
}

// Remove deletes the pod exactly as observed: with grace period 0 and only while the API server still holds
// the pod of that UID. A pod that is gone, or replaced by another of the same name, is left alone and is no
// error.
func Remove(ctx context.Context, cs kubernetes.Interface, namespace, name string, uid types.UID) error {
	zero := int64(0)
	err := cs.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// Run removes every bound pod that is being deleted, until ctx ends. It returns an error only when its pod
// informer cannot start.
func Run(ctx context.Context, cs kubernetes.Interface) error {
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[target](50*time.Millisecond, 5*time.Second),
		workqueue.TypedRateLimitingQueueConfig[target]{Name: "poddelete"})
	defer queue.ShutDown()
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		// An unbound pod has no kubelet: the API server deletes it at once.
		o.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", "").String()
	}))
	informer := factory.Core().V1().Pods().Informer()
	enqueue := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.DeletionTimestamp != nil {
			queue.Add(target{namespace: p.Namespace, name: p.Name, uid: p.UID})
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("poddelete: the pod informer did not sync")
	}
	for range Workers {
		go func() {
			for process(ctx, cs, queue) {
			}
		}()
	}
	<-ctx.Done()
	return nil
}

// process removes the next target and reports whether the queue is still open.
func process(ctx context.Context, cs kubernetes.Interface, queue workqueue.TypedRateLimitingInterface[target]) bool {
	t, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(t)
	if err := Remove(ctx, cs, t.namespace, t.name, t.uid); err != nil {
		if ctx.Err() == nil {
			fmt.Printf("poddelete: remove %s/%s (uid %s): %v; retrying\n", t.namespace, t.name, t.uid, err)
		}
		queue.AddRateLimited(t)
		return true
	}
	queue.Forget(t)
	return true
}
