package raycluster

import (
	"context"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kray-project/kray/pkg/constants"
)

// Worker pod and workload events reach the queue after the batch window, and so does a head coming up; a
// head going down (no longer Ready, failed, being deleted, deleted) at once; objects without the cluster label,
// and pod updates kray does not read, never.
func TestClusterHandlerBatchesAllButAHeadGoingDown(t *testing.T) {
	labelled := func(obj client.Object, nodeType string) client.Object {
		obj.SetNamespace("ns")
		obj.SetName("x")
		obj.SetLabels(map[string]string{constants.LabelCluster: "c", constants.LabelNodeType: nodeType})
		return obj
	}
	pod := func(nodeType string, ready bool, edit func(*corev1.Pod)) *corev1.Pod {
		p := labelled(&corev1.Pod{}, nodeType).(*corev1.Pod)
		p.Status.Phase = corev1.PodRunning
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		if edit != nil {
			edit(p)
		}
		return p
	}
	head := clusterHandler{batch: 50 * time.Millisecond, headLossAtOnce: true}
	cases := []struct {
		name     string
		handler  clusterHandler
		old, obj client.Object
		deleted  bool
		atOnce   bool
		never    bool
	}{
		{name: "worker pod", handler: head, old: pod(constants.NodeTypeWorker, true, nil), obj: pod(constants.NodeTypeWorker, false, nil)},
		{name: "head becomes ready", handler: head, old: pod(constants.NodeTypeHead, false, nil), obj: pod(constants.NodeTypeHead, true, nil)},
		{name: "head stops being ready", handler: head, old: pod(constants.NodeTypeHead, true, nil), obj: pod(constants.NodeTypeHead, false, nil), atOnce: true},
		{name: "head failed", handler: head, old: pod(constants.NodeTypeHead, false, nil),
			obj: pod(constants.NodeTypeHead, false, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), atOnce: true},
		{name: "head being deleted", handler: head, old: pod(constants.NodeTypeHead, true, nil),
			obj: pod(constants.NodeTypeHead, true, func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }), atOnce: true},
		{name: "head deleted", handler: head, obj: pod(constants.NodeTypeHead, true, nil), deleted: true, atOnce: true},
		{name: "CloneSet", handler: clusterHandler{batch: 50 * time.Millisecond}, obj: labelled(&kruisev1alpha1.CloneSet{}, constants.NodeTypeWorker)},
		{name: "batching off", handler: clusterHandler{}, old: pod(constants.NodeTypeWorker, false, nil), obj: pod(constants.NodeTypeWorker, true, nil), atOnce: true},
		{name: "pod update kray does not read", handler: head, old: pod(constants.NodeTypeHead, true, nil),
			obj: pod(constants.NodeTypeHead, true, func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }), never: true},
		{name: "no cluster label", handler: clusterHandler{batch: 50 * time.Millisecond}, obj: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, never: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := clocktesting.NewFakeClock(time.Now())
			q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
				workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Clock: clock})
			defer q.ShutDown()
			old := tc.old
			if old == nil {
				old = tc.obj
			}
			if tc.deleted {
				tc.handler.Delete(context.Background(), event.DeleteEvent{Object: tc.obj}, q)
			} else {
				tc.handler.Update(context.Background(), event.UpdateEvent{ObjectOld: old, ObjectNew: tc.obj}, q)
			}
			if got := q.Len(); got != map[bool]int{true: 1, false: 0}[tc.atOnce] {
				t.Fatalf("queue length right after the event: %d", got)
			}
			want := 1
			if tc.never {
				want = 0
			}
			// The queue's own goroutine moves a delayed item in once the fake clock has passed its time, and
			// only if it registered its timer before the step: step the clock, giving that goroutine a
			// millisecond each time, until the item is in (at most 5 s, however loaded the machine); where
			// nothing may come, step a hundred rounds, far more than a delayed item needs, then look.
			for rounds, deadline := 0, time.Now().Add(5*time.Second); time.Now().Before(deadline); rounds++ {
				if (!tc.never && q.Len() == want) || (tc.never && rounds == 100) {
					break
				}
				clock.Step(50 * time.Millisecond)
				time.Sleep(time.Millisecond)
			}
			if got := q.Len(); got != want {
				t.Fatalf("queue length after the batch window: %d, want %d", got, want)
			}
			if want == 1 {
				req, _ := q.Get()
				if req.Name != "c" || req.Namespace != "ns" {
					t.Errorf("enqueued %v, want ns/c", req)
				}
			}
		})
	}
}
