package controller

import (
	"context"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kray-project/kray/pkg/constants"
)

// Worker pod and workload events reach the queue after the batch window; head pod events at once; objects
// without the cluster label never.
func TestClusterHandlerBatchesAllButHeadPods(t *testing.T) {
	labelled := func(obj client.Object, nodeType string) client.Object {
		obj.SetNamespace("ns")
		obj.SetName("x")
		obj.SetLabels(map[string]string{constants.LabelCluster: "c", constants.LabelNodeType: nodeType})
		return obj
	}
	cases := []struct {
		name    string
		handler clusterHandler
		obj     client.Object
		atOnce  bool
		never   bool
	}{
		{name: "worker pod", handler: clusterHandler{batch: 50 * time.Millisecond, headPodsAtOnce: true}, obj: labelled(&corev1.Pod{}, constants.NodeTypeWorker)},
		{name: "head pod", handler: clusterHandler{batch: 50 * time.Millisecond, headPodsAtOnce: true}, obj: labelled(&corev1.Pod{}, constants.NodeTypeHead), atOnce: true},
		{name: "CloneSet", handler: clusterHandler{batch: 50 * time.Millisecond}, obj: labelled(&kruisev1alpha1.CloneSet{}, constants.NodeTypeWorker)},
		{name: "batching off", handler: clusterHandler{}, obj: labelled(&corev1.Pod{}, constants.NodeTypeWorker), atOnce: true},
		{name: "no cluster label", handler: clusterHandler{batch: 50 * time.Millisecond}, obj: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, never: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			tc.handler.Update(context.Background(), event.UpdateEvent{ObjectOld: tc.obj, ObjectNew: tc.obj}, q)
			if got := q.Len(); got != map[bool]int{true: 1, false: 0}[tc.atOnce] {
				t.Fatalf("queue length right after the event: %d", got)
			}
			time.Sleep(200 * time.Millisecond)
			want := 1
			if tc.never {
				want = 0
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
