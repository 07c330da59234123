package raycluster

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// kray deletes an exited pod under restartPolicy Never only when the cluster's own workload controls it:
// the head's and a worker's are deleted, a pod of another workload that carries the same labels and
// annotation (anyone who may patch pods can write them) is left alone.
func TestExitedUnderNeverOnlyTheClustersPods(t *testing.T) {
	rc := cluster("c").group("g", 1).with(func(rc *rayv1.RayCluster) {
		rc.Spec.HeadGroupSpec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		rc.Spec.WorkerGroupSpecs[0].Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	}).obj()
	e := newEnv(t, rc)
	e.converge(rc)
	exit := func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}
	}
	list := &corev1.PodList{}
	if err := e.api.List(context.Background(), list, client.InNamespace("ns")); err != nil || len(list.Items) != 2 {
		t.Fatalf("pods %d, %v", len(list.Items), err)
	}
	stranger := list.Items[1].DeepCopy()
	stranger.Name, stranger.UID, stranger.ResourceVersion = "stranger", "", ""
	stranger.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "other", UID: "uid-other", Controller: ptr.To(true)}}
	if err := e.api.Create(context.Background(), stranger); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(list.Items, *stranger) {
		exit(&p)
		if err := e.api.Status().Update(context.Background(), &p); err != nil {
			t.Fatal(err)
		}
	}
	e.mustReconcile(rc)
	if got := e.pods(rc); !slices.Equal(got, []string{"stranger"}) {
		t.Errorf("pods left %v, want only the stranger", got)
	}
}
