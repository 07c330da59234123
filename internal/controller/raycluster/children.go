package raycluster

import (
	"context"
	"fmt"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	"github.com/kray-project/kray/pkg/names"
)

// children is a RayCluster's pods, Kruise workloads and head Service as the informer cache held them when
// the reconcile began, read once and shared by every phase and by the status. Two reads go to the API server
// instead, because a stale view there could name the wrong pod: planScale, before pods are named for
// deletion, and reconcileReplicaLabels, before a replica index is handed out.
//
// The pods and CloneSets are the cache's own objects, not copies (a 500-pod group would otherwise be copied
// on every reconcile): nothing may modify them; a write starts from a DeepCopy or a fresh read.
type children struct {
	// pods are every pod labelled with the cluster's name, terminating and exited ones included.
	pods []corev1.Pod
	// cloneSets are every CloneSet labelled with the cluster's name, whoever controls them.
	cloneSets []kruisev1alpha1.CloneSet
	// headSet is the head Advanced StatefulSet, nil when absent.
	headSet *kruisev1beta1.StatefulSet
	// headService is the head Service, nil when absent or not controlled by the RayCluster.
	headService *corev1.Service
}

// readChildren reads rc's children from the cache, the pods and CloneSets by indexCluster.
func (r *Reconciler) readChildren(ctx context.Context, rc *rayv1.RayCluster) (children, error) {
	var c children
	shared := []client.ListOption{client.InNamespace(rc.Namespace), client.MatchingFields{indexCluster: rc.Name}, client.UnsafeDisableDeepCopy}
	pods := &corev1.PodList{}
	if err := r.Cache.List(ctx, pods, shared...); err != nil {
		return c, fmt.Errorf("list pods: %w", err)
	}
	c.pods = pods.Items
	sets := &kruisev1alpha1.CloneSetList{}
	if err := r.Cache.List(ctx, sets, shared...); err != nil {
		return c, fmt.Errorf("list CloneSets: %w", err)
	}
	c.cloneSets = sets.Items
	sts := &kruisev1beta1.StatefulSet{}
	switch err := r.Cache.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: names.HeadStatefulSet(rc.Name)}, sts); {
	case err == nil:
		c.headSet = sts
	case !apierrors.IsNotFound(err):
		return c, fmt.Errorf("get head StatefulSet: %w", err)
	}
	svc := &corev1.Service{}
	switch err := r.Cache.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: names.HeadServiceFor(rc)}, svc); {
	case err == nil && ownedBy(svc, rc):
		c.headService = svc
	case err == nil: // someone else's, reported by the head Service phase
	case !apierrors.IsNotFound(err):
		return c, fmt.Errorf("get head Service: %w", err)
	}
	return c, nil
}

// cloneSet returns the CloneSet named name, nil when there is none.
func (c children) cloneSet(name string) *kruisev1alpha1.CloneSet {
	for i := range c.cloneSets {
		if c.cloneSets[i].Name == name {
			return &c.cloneSets[i]
		}
	}
	return nil
}

// podsMatching returns the pods whose labels sel matches, in the snapshot's order; they are the snapshot's
// own objects, not copies.
func (c children) podsMatching(sel labels.Selector) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range c.pods {
		if sel.Matches(labels.Set(c.pods[i].Labels)) {
			out = append(out, &c.pods[i])
		}
	}
	return out
}

// groupPods returns copies of one worker group's pods (builder.WorkerSelector).
func (c children) groupPods(rc *rayv1.RayCluster, group string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range c.podsMatching(labels.SelectorFromSet(builder.WorkerSelector(rc, group))) {
		out = append(out, *p)
	}
	return out
}
