package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

var rayClusterGVR = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}

const (
	labelCluster  = "ray.io/cluster"
	labelNodeType = "ray.io/node-type"
)

// podRecord is what the recorder saw of one pod (one UID). Times are when the event reached the harness.
type podRecord struct {
	UID, Namespace, Name, Cluster, NodeType string
	Added                                   time.Time // first ADDED event
	Ready                                   time.Time // first time seen Running with Ready=True; zero if never
	Failed                                  bool      // seen in phase Failed
	Deleted                                 time.Time // DELETED event; zero while it exists
}

func (p *podRecord) live() bool { return p.Deleted.IsZero() }

// recorder watches every pod labelled ray.io/cluster and every RayCluster from before the first scenario,
// so that each pod an operator creates is counted once, by UID, however briefly it existed.
type recorder struct {
	mu   sync.Mutex
	pods map[string]*podRecord // by UID
	// readyAt is the first time a RayCluster (namespace/name) was seen with status.state "ready".
	readyAt map[string]time.Time
	changed chan struct{} // closed and replaced on every event, to wake waiters
	stop    context.CancelFunc
}

func startRecorder(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) (*recorder, error) {
	ctx, cancel := context.WithCancel(ctx)
	r := &recorder{pods: map[string]*podRecord{}, readyAt: map[string]time.Time{},
		changed: make(chan struct{}), stop: cancel}
	pf := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = labelCluster }))
	podInf := pf.Core().V1().Pods().Informer()
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.onPod(o, false) },
		UpdateFunc: func(_, o any) { r.onPod(o, false) },
		DeleteFunc: func(o any) { r.onPod(o, true) },
	}); err != nil {
		cancel()
		return nil, err
	}
	df := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	rcInf := df.ForResource(rayClusterGVR).Informer()
	if _, err := rcInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    r.onRayCluster,
		UpdateFunc: func(_, o any) { r.onRayCluster(o) },
	}); err != nil {
		cancel()
		return nil, err
	}
	pf.Start(ctx.Done())
	df.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, rcInf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("recorder informers did not sync")
	}
	return r, nil
}

func (r *recorder) close() { r.stop() }

func (r *recorder) onPod(obj any, deleted bool) {
	now := time.Now()
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.pods[string(p.UID)]
	if rec == nil {
		rec = &podRecord{UID: string(p.UID), Namespace: p.Namespace, Name: p.Name,
			Cluster: p.Labels[labelCluster], NodeType: p.Labels[labelNodeType], Added: now}
		r.pods[rec.UID] = rec
	}
	if rec.Ready.IsZero() && podReady(p) {
		rec.Ready = now
	}
	if p.Status.Phase == corev1.PodFailed {
		rec.Failed = true
	}
	if deleted && rec.Deleted.IsZero() {
		rec.Deleted = now
	}
	r.notify()
}

func (r *recorder) onRayCluster(obj any) {
	now := time.Now()
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	state, _, _ := unstructured.NestedString(u.Object, "status", "state")
	if state != "ready" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := u.GetNamespace() + "/" + u.GetName()
	if _, seen := r.readyAt[key]; !seen {
		r.readyAt[key] = now
		r.notify()
	}
}

// notify wakes every waiter; the caller holds r.mu.
func (r *recorder) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitFor calls done under the recorder's lock after every event until it returns true, ctx ends or the
// timeout passes; it returns when done did (the recorder's time of that event is then the caller's to read).
func (r *recorder) waitFor(ctx context.Context, timeout time.Duration, done func() bool) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ok := done()
		ch := r.changed
		r.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("timed out after %s", timeout)
		}
	}
}

// podsOf returns copies of the records of the pods of the given clusters (namespace/name keys).
func (r *recorder) podsOf(clusters map[string]bool) []podRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.podsOfLocked(clusters)
}

func (r *recorder) podsOfLocked(clusters map[string]bool) []podRecord {
	var out []podRecord
	for _, p := range r.pods {
		if clusters[p.Namespace+"/"+p.Cluster] {
			out = append(out, *p)
		}
	}
	return out
}
