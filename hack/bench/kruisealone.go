package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
	kraynames "github.com/kray-project/kray/pkg/names"
)

// kruiseAlone is the entry of the operators list that runs no operator: the harness itself applies the head
// Service, head Advanced StatefulSet and worker CloneSet that kray builds for each RayCluster, straight to the
// API server, and waits for their pods. Its latency is Kruise's alone, the floor under kray's; kray's minus
// it is kray's own overhead. It runs the scenarios marked floor (create and scale).
const kruiseAlone = "kruise-alone"

var (
	serviceGVR  = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	headSetGVR  = schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1beta1", Resource: "statefulsets"}
	cloneSetGVR = schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1alpha1", Resource: "clonesets"}
)

func (e *env) alone() bool { return e.op.name == kruiseAlone }

// builtObject is one object kray would create, with its resource.
type builtObject struct {
	gvr   schema.GroupVersionResource
	typed runtime.Object
	obj   *unstructured.Unstructured // typed, unstructured and without owner references
}

// builtObjects returns what kray's builders make for the benchmark RayCluster ns/name, without owner
// references (no RayCluster exists to own them).
func builtObjects(ns, name string, s clusterSpec) ([]builtObject, error) {
	rc := &rayv1.RayCluster{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(rayCluster(ns, name, s).Object, rc); err != nil {
		return nil, err
	}
	opts := builder.Options{Version: "bench"}
	objs := []builtObject{
		{gvr: serviceGVR, typed: builder.HeadService(rc, opts)},
		{gvr: headSetGVR, typed: builder.HeadStatefulSet(rc, opts)},
		{gvr: cloneSetGVR, typed: builder.WorkerCloneSet(rc, &rc.Spec.WorkerGroupSpecs[0], opts, false)},
	}
	for i := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(objs[i].typed)
		if err != nil {
			return nil, err
		}
		objs[i].obj = &unstructured.Unstructured{Object: m}
		objs[i].obj.SetOwnerReferences(nil)
	}
	return objs, nil
}

// createWorkloads is createClusters for kruise-alone: it creates, at rate per second, each named cluster's
// built objects, and returns when each cluster's first create was sent and the first error.
func (e *env) createWorkloads(ctx context.Context, ns string, clusters []string, s clusterSpec, rate float64) (map[string]time.Time, error) {
	return createAtRate(ctx, ns, clusters, rate, func(ctx context.Context, name string) error {
		return e.createBuilt(ctx, ns, name, s)
	})
}

func (e *env) createBuilt(ctx context.Context, ns, name string, s clusterSpec) error {
	objs, err := builtObjects(ns, name, s)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if _, err := e.dyn.Resource(o.gvr).Namespace(ns).Create(ctx, o.obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s %s/%s: %w", o.gvr.Resource, ns, o.obj.GetName(), err)
		}
	}
	return nil
}

// scaleWorkers sets the replicas of cluster ns/name's worker CloneSet, as kray would for a replicas change.
func (e *env) scaleWorkers(ctx context.Context, ns, name string, replicas int) error {
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	_, err := e.dyn.Resource(cloneSetGVR).Namespace(ns).Patch(ctx, kraynames.WorkerCloneSet(name, "workers"), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// waitPodsReady is waitClustersReady for kruise-alone: a cluster is ready once 1 + workers of its pods are
// live and Ready, at the time the last of them became Ready (recorded in readyAt, like a RayCluster's).
func (e *env) waitPodsReady(ctx context.Context, keys map[string]time.Time, workers int) error {
	err := e.rec.waitFor(ctx, e.cfg.Timeout, func() bool {
		done := true
		for k := range keys {
			if _, ok := e.rec.readyAt[k]; ok {
				continue
			}
			n, last := 0, time.Time{}
			for _, p := range e.rec.podsOfLocked(map[string]bool{k: true}) {
				if p.live() && !p.Ready.IsZero() {
					n++
					if p.Ready.After(last) {
						last = p.Ready
					}
				}
			}
			if n >= 1+workers {
				e.rec.readyAt[k] = last
			} else {
				done = false
			}
		}
		return done
	})
	if err != nil {
		return fmt.Errorf("waiting for the pods of %d clusters to be ready (%d are): %w", len(keys), e.readyCount(keys), err)
	}
	return nil
}
