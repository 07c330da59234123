package builder_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/builder"
)

// The restart of a worker's Ray container: its one container, Kruise's failure policy, a hold before the kill, a deadline after
// which kray replaces the pod, a name of the pod and the run, and the RayCluster as its controller.
func TestWorkerRestart(t *testing.T) {
	rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "rc-uid"}}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "c-gpu-worker-x7k2p", Namespace: "ns", Labels: map[string]string{"ray.io/group": "gpu"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-worker"}, {Name: "sidecar"}}},
	}
	got, err := yaml.Marshal(builder.WorkerRestart(rc, p, "containerd://abc", "HeadReplaced", false))
	if err != nil {
		t.Fatal(err)
	}
	want := `apiVersion: apps.kruise.io/v1alpha1
kind: ContainerRecreateRequest
metadata:
  annotations:
    kray.io/restart-reason: HeadReplaced
    kray.io/restarted-run: containerd://abc
  labels:
    ray.io/cluster: c
    ray.io/group: gpu
    ray.io/node-type: worker
  name: c-gpu-worker-x7k2p-restart-a66fbcbe
  namespace: ns
  ownerReferences:
  - apiVersion: ray.io/v1
    blockOwnerDeletion: true
    controller: true
    kind: RayCluster
    name: c
    uid: rc-uid
spec:
  activeDeadlineSeconds: 60
  containers:
  - name: ray-worker
  podName: c-gpu-worker-x7k2p
  strategy:
    failurePolicy: Fail
    unreadyGracePeriodSeconds: 1
  ttlSecondsAfterFinished: 600
status:
  phase: ""
`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("WorkerRestart (-want +got):\n%s", diff)
	}
	if other := builder.WorkerRestart(rc, p, "containerd://def", "HeadReplaced", false); other.Name == "c-gpu-worker-x7k2p-restart-a66fbcbe" {
		t.Error("two runs of one pod share a restart name")
	}
}

// A quick restart stops the container within a second, unless it has a preStop hook: the hook keeps the pod's
// grace, which Kruise gives a request that names none.
func TestWorkerRestartQuickStop(t *testing.T) {
	rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "rc-uid"}}
	pod := func(hook bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c-g-worker-x", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-worker"}}}}
		if hook {
			p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"ray", "stop"}}}}
		}
		return p
	}
	for _, tc := range []struct {
		name        string
		quick, hook bool
		want        *int64
	}{
		{name: "quick", quick: true, want: ptr.To[int64](builder.WorkerRestartQuickStopSeconds)},
		{name: "quick with a preStop hook", quick: true, hook: true},
		{name: "not quick", quick: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := builder.WorkerRestart(rc, pod(tc.hook), "containerd://abc", "HeadReplaced", tc.quick).Spec.Strategy.TerminationGracePeriodSeconds
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("terminationGracePeriodSeconds (-want +got):\n%s", diff)
			}
		})
	}
}
