package scale

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kray-project/kray/pkg/constants"
)

// DeadPods returns the exited pods that a CloneSet (uid) left behind; it has already replaced them, and kray
// deletes them so they neither linger nor get counted.
func DeadPods(pods []corev1.Pod, uid types.UID) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if IsControlledBy(p, uid) && p.DeletionTimestamp == nil && IsDead(p) {
			out = append(out, p)
		}
	}
	return out
}

// ExitedUnderNever returns the running pods whose template asked for restartPolicy Never (recorded by the
// builder in an annotation) and whose Ray container has terminated: KubeRay would delete them, so kray does,
// and the workload replaces them with a fresh pod.
func ExitedUnderNever(pods []corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || IsDead(p) || p.Annotations[constants.AnnotationRestartPolicy] != string(corev1.RestartPolicyNever) {
			continue
		}
		if len(p.Spec.Containers) == 0 {
			continue
		}
		ray := p.Spec.Containers[constants.RayContainerIndex].Name
		for _, cs := range p.Status.ContainerStatuses {
			// Kruise runs the pod with restartPolicy Always, so the kubelet may already have restarted the
			// container: a restart counts as an exit.
			if cs.Name == ray && (cs.State.Terminated != nil || cs.RestartCount > 0) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}
