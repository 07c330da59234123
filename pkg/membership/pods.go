package membership

import (
	"encoding/json"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/ray"
)

// Head is the cluster's head pod as the decision reads it: a zero Run means it is not running and ready, and
// nothing is decided.
type Head struct {
	// Name is the head pod's name, the instance ID its Ray node registers with.
	Name string
	// Run identifies the head's current run: the pod's UID and its Ray container's ID. A new run is a new GCS.
	Run string
	// IPs are every IP of the head pod.
	IPs []string
}

// Worker is one worker pod whose Ray container runs, as the decision reads it.
type Worker struct {
	Pod *corev1.Pod
	// Run identifies the Ray container's current run: the pod's UID and the container's ID.
	Run string
	// ContainerID is the Ray container's ID in this run; a restart is asked once per run, by this ID.
	ContainerID string
	// Ready is the pod's Ready condition.
	Ready bool
}

// HeadOf reads the head pod; the zero Head when it is absent, going, not running or not ready.
func HeadOf(p *corev1.Pod) Head {
	id, ok := rayContainerRunning(p)
	if !ok || !ready(p) {
		return Head{}
	}
	return Head{Name: p.Name, Run: string(p.UID) + "/" + id, IPs: IPs(p)}
}

// WorkerOf reads a worker pod: false unless its Ray container runs in a running pod that no one is deleting or
// updating. Kruise holds pods it is about to delete or update in place (kray drains their Ray node there, and a
// drained raylet exits), and a container that is not running is the kubelet's business.
func WorkerOf(p *corev1.Pod) (Worker, bool) {
	switch p.Labels[constants.LabelKruiseLifecycleState] {
	case "", constants.KruiseStateNormal, constants.KruiseStateUpdated:
	default:
		return Worker{}, false
	}
	id, ok := rayContainerRunning(p)
	if !ok {
		return Worker{}, false
	}
	return Worker{Pod: p, Run: string(p.UID) + "/" + id, ContainerID: id, Ready: ready(p)}, true
}

// rayContainerRunning is the ID of the pod's running Ray container; false when the pod is going, not running,
// or its Ray container is not running.
func rayContainerRunning(p *corev1.Pod) (string, bool) {
	if p == nil || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || len(IPs(p)) == 0 || len(p.Spec.Containers) == 0 {
		return "", false
	}
	name := p.Spec.Containers[constants.RayContainerIndex].Name
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == name {
			return cs.ContainerID, cs.State.Running != nil && cs.ContainerID != ""
		}
	}
	return "", false
}

// ready is the pod's Ready condition.
func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// IPs are every IP the pod is known by: status.podIP, status.podIPs (both families of a dual-stack pod) and
// the IPs of the networks the Multus CNI reports in its network-status annotation.
func IPs(p *corev1.Pod) []string {
	var out []string
	add := func(ip string) {
		if ip != "" && !slices.Contains(out, ip) {
			out = append(out, ip)
		}
	}
	add(p.Status.PodIP)
	for _, ip := range p.Status.PodIPs {
		add(ip.IP)
	}
	var networks []struct {
		IPs []string `json:"ips"`
	}
	if s := p.Annotations[constants.AnnotationMultusNetworkStatus]; s != "" && json.Unmarshal([]byte(s), &networks) == nil {
		for _, n := range networks {
			for _, ip := range n.IPs {
				add(ip)
			}
		}
	}
	return out
}

// Listed reports whether nodes hold a node of the pod that is not dead: registered with the pod's name as
// instance ID, or, registered without one, at one of the pod's IPs.
func Listed(nodes []ray.Node, name string, ips []string) bool {
	for _, n := range nodes {
		if n.Status == ray.NodeStatusDead {
			continue
		}
		if n.InstanceID == name || (n.InstanceID == "" && n.IP != "" && slices.Contains(ips, n.IP)) {
			return true
		}
	}
	return false
}

// listsHead reports whether nodes are this cluster's current GCS speaking: they hold the head's node, alive,
// registered under the head pod's name at one of its IPs.
func listsHead(nodes []ray.Node, h Head) bool {
	for _, n := range nodes {
		if n.Status != ray.NodeStatusDead && n.InstanceID == h.Name && slices.Contains(h.IPs, n.IP) {
			return true
		}
	}
	return false
}
