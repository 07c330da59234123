package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/validation"
)

// ipprSize is the size Ray's autoscaler resizes a worker's Ray container to: its limits, from the kind
// cluster's 500m/256Mi, with the requests raised by as much (Ray keeps the gap, so the QoS class stays).
var ipprSize = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("260m"), corev1.ResourceMemory: resource.MustParse("192Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("750m"), corev1.ResourceMemory: resource.MustParse("384Mi")},
}

// Ray's autoscaler v2 resizes workers in place (IPPR) with the rights kray gives the head: the kubelet applies
// the new CPU and memory to the running container (same pod, no restart), and neither kray's reconciles nor
// Kruise's scaling undo it. A resized worker then leaves by name like any other, and an in-place image update
// restarts the other one's container once, keeping the size Ray gave it.
func TestKindAutoscalerResizesWorkersInPlace(t *testing.T) {
	requireKind(t)
	g := NewWithT(t)
	rc := kindRayCluster(kindNamespace(t), "ippr", 2)
	rc.Annotations = map[string]string{constants.AnnotationIPPR: `{"groups": {"workergroup": {"max-cpu": "1", "max-memory": "512Mi", "resize-timeout": 60}}}`}
	rc.Spec.EnableInTreeAutoscaling = ptr.To(true)
	rc.Spec.AutoscalerOptions = &rayv1.AutoscalerOptions{Version: ptr.To(rayv1.AutoscalerVersionV2)}
	withUpgrade(rc, rayv1.RayClusterRollingUpdate, 0)
	fitKindNode(rc)
	create(t, rc)
	waitKindReady(t, rc, 2)
	template := rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Resources
	autoscaler := headServiceAccountClient(g, rc)

	workers := workerPods(g, rc, "workergroup")
	g.Expect(workers).To(HaveLen(2))
	for _, p := range workers {
		resizeAsRay(g, autoscaler, &p, ipprSize)
	}
	resized := uids(workers)
	g.Eventually(func(g Gomega) {
		for _, p := range workerPods(g, rc, "workergroup") {
			expectRunningAt(g, &p, ipprSize, 0)
			g.Expect(p.Annotations).To(HaveKey(constants.AnnotationIPPRStatus))
		}
	}, kindTimeout, time.Second).Should(Succeed())

	// The autoscaler adds a worker: kray reconciles, Kruise scales the CloneSet, and the resized pods stay
	// as they are; the new one has the template's size.
	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](3) })
	waitKindReady(t, rc, 3)
	g.Consistently(func(g Gomega) {
		for _, p := range workerPods(g, rc, "workergroup") {
			if _, ok := resized[p.Name]; ok {
				g.Expect(p.UID).To(Equal(resized[p.Name]))
				expectRunningAt(g, &p, ipprSize, 0)
			} else {
				expectRunningAt(g, &p, template, 0)
			}
		}
	}, 15*time.Second, time.Second).Should(Succeed())
	g.Expect(eventCount(g, rc, validation.EventInvalidIPPRSpec)).To(BeZero())

	// A resized worker removed by name goes like any other.
	victim, kept := workers[0], workers[1]
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](2)
		c.Spec.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete = []string{victim.Name}
	})
	g.Eventually(func(g Gomega) {
		left := uids(workerPods(g, rc, "workergroup"))
		g.Expect(left).To(HaveLen(2))
		g.Expect(left).NotTo(HaveKey(victim.Name))
		g.Expect(left).To(HaveKeyWithValue(kept.Name, kept.UID))
	}, kindTimeout, time.Second).Should(Succeed())
	g.Expect(ledger.deletedNames(t, rc)).To(ConsistOf(victim.Name))

	// An image update in place restarts each worker's container once; the resized one keeps Ray's size.
	before := uids(workerPods(g, rc, "workergroup"))
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = kindUpgradeImage
	})
	g.Eventually(func(g Gomega) {
		pods := workerPods(g, rc, "workergroup")
		g.Expect(uids(pods)).To(Equal(before), "the same pods, updated in place")
		for _, p := range pods {
			g.Expect(podReady(&p)).To(BeTrue(), "pod %s ready", p.Name)
			g.Expect(runsImage(&p, kindUpgradeImage)).To(BeTrue(), "pod %s runs the new image", p.Name)
			size := template
			if p.Name == kept.Name {
				size = ipprSize
			}
			expectRunningAt(g, &p, size, 1)
		}
	}, kindTimeout, time.Second).Should(Succeed())
	g.Expect(eventCount(g, rc, raycluster.EventDeletedWorkerPod)).To(Equal(int32(1)))
	expectOperatorNeverForbidden(t)
}

// headServiceAccountClient is a clientset that acts as the cluster's head pod does: as its service account,
// with the Role kray made for Ray's autoscaler.
func headServiceAccountClient(g Gomega, rc *rayv1.RayCluster) kubernetes.Interface {
	head := headPod(g, rc)
	cfg := rest.CopyConfig(restCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: fmt.Sprintf("system:serviceaccount:%s:%s", rc.Namespace, head.Spec.ServiceAccountName)}
	return kubernetes.NewForConfigOrDie(cfg)
}

// resizeAsRay resizes the pod's Ray container to size to as Ray's autoscaler v2 does
// (ippr_provider.py): a JSON patch of pods/<name>/resize with plain numbers (cores, bytes), then its record
// in the pod's ray.io/ippr-status annotation with a strategic merge patch.
func resizeAsRay(g Gomega, c kubernetes.Interface, p *corev1.Pod, to corev1.ResourceRequirements) {
	ctx := context.Background()
	var ops []map[string]any
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		for _, kind := range []string{"limits", "requests"} {
			q := to.Limits[r]
			if kind == "requests" {
				q = to.Requests[r]
			}
			value := any(q.Value())
			if r == corev1.ResourceCPU {
				value = q.AsApproximateFloat64()
			}
			ops = append(ops, map[string]any{"op": "replace", "path": fmt.Sprintf("/spec/containers/0/resources/%s/%s", kind, r), "value": value})
		}
	}
	patch, err := json.Marshal(ops)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.JSONPatchType, patch, metav1.PatchOptions{}, "resize")
	g.Expect(err).NotTo(HaveOccurred(), "the autoscaler's resize of %s", p.Name)

	status, err := json.Marshal(map[string]any{
		"raylet-id": nil, "resizing-at": time.Now().Unix(), "suggested-max-cpu": nil, "suggested-max-memory": nil,
		"last-failed-at": nil, "last-failed-reason": nil,
	})
	g.Expect(err).NotTo(HaveOccurred())
	annotate, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{constants.AnnotationIPPRStatus: string(status)}}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, annotate, metav1.PatchOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "the autoscaler's record on %s", p.Name)
}

// expectRunningAt expects the pod's Ray container to ask for size and to run at it, as the kubelet reports it,
// with no resize left pending or in progress, after restarts restarts.
func expectRunningAt(g Gomega, p *corev1.Pod, size corev1.ResourceRequirements, restarts int32) {
	ray := p.Spec.Containers[0]
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		g.Expect(sameQuantity(ray.Resources.Requests[r], size.Requests[r])).To(BeTrue(), "pod %s: %s request %s, want %s", p.Name, r, ptr.To(ray.Resources.Requests[r]), ptr.To(size.Requests[r]))
		g.Expect(sameQuantity(ray.Resources.Limits[r], size.Limits[r])).To(BeTrue(), "pod %s: %s limit %s, want %s", p.Name, r, ptr.To(ray.Resources.Limits[r]), ptr.To(size.Limits[r]))
	}
	st := rayContainerStatus(p)
	g.Expect(st.Resources).NotTo(BeNil(), "pod %s: the kubelet reports the Ray container's resources", p.Name)
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		g.Expect(sameQuantity(st.Resources.Limits[r], size.Limits[r])).To(BeTrue(), "pod %s: %s limit the kubelet applied %s, want %s", p.Name, r, ptr.To(st.Resources.Limits[r]), ptr.To(size.Limits[r]))
	}
	g.Expect(st.RestartCount).To(Equal(restarts), "pod %s: Ray container restarts", p.Name)
	for _, c := range p.Status.Conditions {
		g.Expect(string(c.Type)).NotTo(BeElementOf("PodResizePending", "PodResizeInProgress"), "pod %s: %s %s", p.Name, c.Reason, c.Message)
	}
}

// sameQuantity reports whether a and b are the same amount, whatever their notation.
func sameQuantity(a, b resource.Quantity) bool {
	return a.Cmp(b) == 0
}
