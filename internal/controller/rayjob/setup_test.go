package rayjob

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/fixture"
	"github.com/kray-project/kray/pkg/constants"
)

// A head pod wakes its cluster's RayJob when it starts or ends an incarnation, and only then.
func TestHeadPodEvents(t *testing.T) {
	pod := func(nodeType string, restarts int32) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{constants.LabelCluster: "c", constants.LabelNodeType: nodeType}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "ray-head", RestartCount: restarts}}}}
	}
	p := HeadIncarnationChanged()
	head, worker := pod(constants.NodeTypeHead, 0), pod(constants.NodeTypeWorker, 0)
	ready := head.DeepCopy()
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	for _, tt := range []struct {
		name string
		got  bool
		want bool
	}{
		{"a head pod created", p.Create(event.CreateEvent{Object: head}), true},
		{"a head pod deleted", p.Delete(event.DeleteEvent{Object: head}), true},
		{"a head container restarted", p.Update(event.UpdateEvent{ObjectOld: head, ObjectNew: pod(constants.NodeTypeHead, 1)}), true},
		{"a head pod's other change", p.Update(event.UpdateEvent{ObjectOld: head, ObjectNew: ready}), false},
		{"a worker pod created", p.Create(event.CreateEvent{Object: worker}), false},
		{"a worker container restarted", p.Update(event.UpdateEvent{ObjectOld: worker, ObjectNew: pod(constants.NodeTypeWorker, 1)}), false},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: passed %t, want %t", tt.name, tt.got, tt.want)
		}
	}

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, rayv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	job := newJob()
	ofJob := Cluster(job, "c")
	mine := fixture.Cluster("ns", "mine")
	r := &Reconciler{Cache: fake.NewClientBuilder().WithScheme(scheme).WithObjects(ofJob, mine).Build()}
	if got, want := r.jobOfHeadPod(context.Background(), head), []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "train"}}}; !cmp.Equal(got, want) {
		t.Errorf("head of the RayJob's cluster: %v, want %v", got, want)
	}
	other := head.DeepCopy()
	other.Labels[constants.LabelCluster] = "mine"
	if got := r.jobOfHeadPod(context.Background(), other); len(got) != 0 {
		t.Errorf("head of a cluster no RayJob controls: %v, want none", got)
	}
}
