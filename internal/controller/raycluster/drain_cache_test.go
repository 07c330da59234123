package raycluster

import (
	"context"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/ray"
)

// snapshot is an informer cache that stopped at this moment: the objects of the kinds the drain phase reads,
// as e's API server holds them now, behind the same indexes.
func snapshot(t *testing.T, e *env) client.Reader {
	t.Helper()
	var objs []client.Object
	for _, list := range []client.ObjectList{&rayv1.RayClusterList{}, &corev1.PodList{}, &corev1.ServiceList{},
		&kruisev1alpha1.CloneSetList{}, &kruisev1beta1.StatefulSetList{}, &policyv1.PodDisruptionBudgetList{}} {
		if err := e.api.List(context.Background(), list); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			objs = append(objs, item.(client.Object))
		}
	}
	return fakeAPI(objs...)
}

// A drain asked for by one reconcile is not asked again by the next when the informer cache has not yet seen
// the record the first one wrote on the pod.
func TestDrainIsAskedOnceBehindALaggingCache(t *testing.T) {
	e, gcs, rc := drainingEnv(t, ray.NodeStatusRunning)
	pod := e.get(&corev1.Pod{}, "c-g-worker-00000").(*corev1.Pod)
	pod.Labels[constants.LabelKruiseLifecycleState] = constants.KruiseStatePreparingDelete
	pod.Annotations = map[string]string{constants.AnnotationKruiseLifecycleTimestamp: testNow.Add(-time.Minute).Format(time.RFC3339)}
	if err := e.api.Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	e.r.Cache = snapshot(t, e)
	for range 3 {
		if _, _, err := e.reconcile(rc); err != nil {
			t.Logf("reconcile: %v", err) // the stale cache may fail the status write; only the drain requests count
		}
	}
	if len(gcs.drained) != 1 {
		t.Fatalf("%d drain requests for one held pod behind a lagging cache, want 1", len(gcs.drained))
	}
	live := e.get(&corev1.Pod{}, "c-g-worker-00000").(*corev1.Pod)
	if live.Annotations[constants.AnnotationDrainStarted] == "" {
		t.Error("the drain start was not recorded in the pod")
	}
}
