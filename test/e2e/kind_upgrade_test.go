package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/internal/kuberayref"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// kindUpgradeImage is the image the kind upgrade tests move to: another tag of the suite's Ray image, already on
// the node.
const kindUpgradeImage = "rayproject/ray:2.52.0"

// fitKindNode lowers the CPU and memory of every container of rc, the autoscaler's included, to what one kind
// node holds beside the control plane; nothing else of the manifest changes.
func fitKindNode(rc *rayv1.RayCluster) {
	fit := func(tmpl *corev1.PodTemplateSpec) {
		for i := range tmpl.Spec.Containers {
			tmpl.Spec.Containers[i].Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			}
		}
	}
	fit(&rc.Spec.HeadGroupSpec.Template)
	for i := range rc.Spec.WorkerGroupSpecs {
		fit(&rc.Spec.WorkerGroupSpecs[i].Template)
	}
	if ptr.Deref(rc.Spec.EnableInTreeAutoscaling, false) {
		// The autoscaler sidecar's default is 500m.
		if rc.Spec.AutoscalerOptions == nil {
			rc.Spec.AutoscalerOptions = &rayv1.AutoscalerOptions{}
		}
		small := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{}}}}
		fit(&small)
		rc.Spec.AutoscalerOptions.Resources = &small.Spec.Containers[0].Resources
	}
}

// podEvents returns "reason: message" of the kubelet's events about the cluster's pods.
func podEvents(g Gomega, rc *rayv1.RayCluster) []string {
	list, err := clientset.CoreV1().Events(rc.Namespace).List(context.Background(), metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Pod" && strings.HasPrefix(e.InvolvedObject.Name, rc.Name+"-") {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

// KubeRay's v1.7 sample as users apply it, with no imagePullPolicy: its pods start from the image already on the
// node (the API server's IfNotPresent for a tagged image), never asking a registry; with Kruise's defaulting
// (Always) they stayed in ImagePullBackOff, as no registry is reachable here.
func TestKindKubeRaySampleBecomesReady(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	rc := &rayv1.RayCluster{}
	g.Expect(kuberayref.Sample("ray-cluster.sample.yaml", "RayCluster", rc)).To(Succeed())
	rc.Namespace = kindNamespace(t)
	fitKindNode(rc)
	create(t, rc)
	waitKindReady(t, rc, 1)
	for _, p := range clusterPods(g, rc) {
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			g.Expect(c.ImagePullPolicy).To(Equal(corev1.PullIfNotPresent), "pod %s container %s", p.Name, c.Name)
		}
	}
	events := podEvents(g, rc)
	g.Expect(events).To(ContainElement(ContainSubstring("already present on machine")))
	g.Expect(events).NotTo(ContainElement(HavePrefix("Pulling:")))
	expectOperatorNeverForbidden(t)
}

// An image change under RollingUpdate with workerDrain, where every pod asks for restartPolicy Never (the
// workers explicitly, the head through autoscaler v2): Kruise updates each pod in place, the kubelet restarts
// its containers (restart count 1), and kray reads that restart as the update, not as an exit: the same pods
// run the new image and none is deleted.
func TestKindInPlaceUpgradeUnderRestartPolicyNever(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	rc := kindRayCluster(kindNamespace(t), "never", 2)
	// The head is updated too: without GCS fault tolerance its new GCS would end every worker's Ray node.
	faultTolerant(t, rc)
	withUpgrade(rc, rayv1.RayClusterRollingUpdate, 60)
	rc.Spec.EnableInTreeAutoscaling = ptr.To(true)
	rc.Spec.AutoscalerOptions = &rayv1.AutoscalerOptions{Version: ptr.To(rayv1.AutoscalerVersionV2)}
	rc.Spec.WorkerGroupSpecs[0].Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	create(t, rc)
	waitKindReady(t, rc, 2)
	before := uids(clusterPods(g, rc))
	g.Expect(before).To(HaveLen(3))

	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image = kindUpgradeImage
		c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = kindUpgradeImage
	})
	g.Eventually(func(g Gomega) {
		pods := clusterPods(g, rc)
		g.Expect(uids(pods)).To(Equal(before), "the same pods, updated in place")
		for _, p := range pods {
			g.Expect(podReady(&p)).To(BeTrue(), "pod %s ready", p.Name)
			g.Expect(runsImage(&p, kindUpgradeImage)).To(BeTrue(), "pod %s runs the new image", p.Name)
			g.Expect(rayContainerStatus(&p).RestartCount).To(Equal(int32(1)), "pod %s: the kubelet restarted its Ray container once, for the update", p.Name)
		}
	}, kindTimeout, time.Second).Should(Succeed())
	// Reconciles after the update see the restart counts; none may take them for exits.
	g.Consistently(func(g Gomega) {
		g.Expect(uids(clusterPods(g, rc))).To(Equal(before))
	}, 10*time.Second, time.Second).Should(Succeed())
	_, deleted := ledger.counts(t, rc)
	g.Expect(deleted).To(BeZero())
	g.Expect(eventCount(g, rc, raycluster.EventDeletedWorkerPod)).To(BeZero())
	g.Expect(eventCount(g, rc, raycluster.EventDeletedHeadPod)).To(BeZero())
	expectOperatorNeverForbidden(t)
}

// withUpgrade gives rc the upgrade strategy typ and, when drainSeconds is not 0, workerDrain with that timeout.
func withUpgrade(rc *rayv1.RayCluster, typ rayv1.RayClusterUpgradeType, drainSeconds int32) {
	rc.Spec.UpgradeStrategy = &rayv1.RayClusterUpgradeStrategy{Type: ptr.To(typ)}
	if drainSeconds != 0 {
		rc.Spec.WorkerDrain = &rayv1.WorkerDrainOptions{TimeoutSeconds: ptr.To(drainSeconds)}
	}
}

// runsImage reports whether the pod's Ray container runs image, as the kubelet reports it (with its registry).
func runsImage(p *corev1.Pod, image string) bool {
	return strings.HasSuffix(rayContainerStatus(p).Image, image)
}

// rayContainerStatus is the status of the pod's Ray container (its first).
func rayContainerStatus(p *corev1.Pod) corev1.ContainerStatus {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == p.Spec.Containers[0].Name {
			return cs
		}
	}
	return corev1.ContainerStatus{}
}

// Under RollingUpdate with workerDrain, on real kubelets and the fake Ray's GCS (whose drained raylet exits, as
// Ray's does): a change of the workers' labels restarts nothing and drains nothing; a change of their image
// drains each worker's Ray node once, releases it once that node is DEAD, and updates the same pod in place
// (one container restart). The head is left alone by both.
func TestKindRollingUpdateDrainsOnlyWhatRestarts(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	rc := kindRayCluster(kindNamespace(t), "drain", 2)
	withUpgrade(rc, rayv1.RayClusterRollingUpdate, 300)
	create(t, rc)
	waitKindReady(t, rc, 2)
	before := uids(clusterPods(g, rc))
	head := headPod(g, rc)

	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Template.Labels = map[string]string{"team": "blue"}
	})
	g.Eventually(func(g Gomega) {
		for _, p := range workerPods(g, rc, "workergroup") {
			g.Expect(p.Labels).To(HaveKeyWithValue("team", "blue"), "pod %s relabelled in place", p.Name)
			g.Expect(p.Labels).To(HaveKeyWithValue("lifecycle.apps.kruise.io/state", "Normal"))
			g.Expect(podReady(&p)).To(BeTrue(), "pod %s ready", p.Name)
			g.Expect(rayContainerStatus(&p).RestartCount).To(BeZero(), "pod %s: nothing restarted", p.Name)
		}
	}, kindTimeout, time.Second).Should(Succeed())
	g.Expect(uids(clusterPods(g, rc))).To(Equal(before))
	g.Expect(eventCount(g, rc, raycluster.EventDrainingWorker)).To(BeZero(), "a label change drains nothing")
	g.Expect(eventMessages(g, rc, raycluster.EventDrainedWorker)).To(HaveLen(2))
	g.Expect(eventMessages(g, rc, raycluster.EventDrainedWorker)).To(HaveEach(ContainSubstring("restarts no container")))

	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = kindUpgradeImage
	})
	g.Eventually(func(g Gomega) {
		for _, p := range workerPods(g, rc, "workergroup") {
			cs := rayContainerStatus(&p)
			g.Expect(runsImage(&p, kindUpgradeImage)).To(BeTrue(), "pod %s runs the new image", p.Name)
			g.Expect(podReady(&p)).To(BeTrue(), "pod %s ready", p.Name)
			g.Expect(cs.RestartCount).To(Equal(int32(1)), "pod %s: one restart, the update's", p.Name)
		}
	}, kindTimeout, time.Second).Should(Succeed())
	g.Expect(uids(clusterPods(g, rc))).To(Equal(before), "the same pods, updated in place")
	g.Expect(eventMessages(g, rc, raycluster.EventDrainingWorker)).To(HaveLen(2), "one drain per worker")
	g.Expect(eventMessages(g, rc, raycluster.EventDrainedWorker)).To(ContainElements(
		MatchRegexp(`released to be updated in place: its Ray node [0-9a-f]+ (is DEAD|has left the cluster)`),
		MatchRegexp(`released to be updated in place: its Ray node [0-9a-f]+ (is DEAD|has left the cluster)`)))
	g.Expect(eventCount(g, rc, raycluster.EventDrainTimedOut)).To(BeZero())
	g.Expect(eventCount(g, rc, raycluster.EventDrainFailed)).To(BeZero())
	now := headPod(g, rc)
	g.Expect(now.UID).To(Equal(head.UID))
	g.Expect(rayContainerStatus(now).RestartCount).To(BeZero(), "the head is left alone")
	expectOperatorNeverForbidden(t)
}

// fitKindSpec is fitKindNode for a RayCluster spec.
func fitKindSpec(spec *rayv1.RayClusterSpec) {
	rc := &rayv1.RayCluster{Spec: *spec}
	fitKindNode(rc)
	*spec = rc.Spec
}

// waitKindServiceReady waits until the RayService is Ready on real containers and returns its active cluster.
func waitKindServiceReady(t *testing.T, svc *rayv1.RayService) string {
	t.Helper()
	var active string
	NewWithT(t).Eventually(func(g Gomega) {
		cur := getService(g, svc)
		ready := serviceCondition(cur, rayv1.RayServiceReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "%s: %s", ready.Reason, ready.Message)
		active = cur.Status.ActiveServiceStatus.RayClusterName
		g.Expect(active).NotTo(BeEmpty())
	}, 2*kindTimeout, time.Second).Should(Succeed())
	return active
}

// KubeRay's RayService sample with kray.io/in-place-worker-upgrade, on real kubelets and the fake Ray's Serve
// (whose proxies run where replicas run): a worker image change rolls through the serving cluster: no second
// cluster, the head the same pod, each worker drained once and updated in place, and the serve Service never
// without a ready endpoint.
func TestKindRayServiceInPlaceWorkerRoll(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	ns := kindNamespace(t)
	clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
	svc := kubeRayServiceSample(t, "ray-service.sample.yaml", ns)
	svc.Annotations = map[string]string{constants.AnnotationInPlaceWorkerUpgrade: "true"}
	svc.Spec.RayClusterDeletionDelaySeconds = ptr.To[int32](1)
	fitKindSpec(&svc.Spec.RayClusterSpec)
	w := &svc.Spec.RayClusterSpec.WorkerGroupSpecs[0]
	w.Replicas, w.MinReplicas, w.MaxReplicas = ptr.To[int32](3), ptr.To[int32](3), ptr.To[int32](5)
	svc.Spec.RayClusterSpec.WorkerDrain = &rayv1.WorkerDrainOptions{TimeoutSeconds: ptr.To[int32](120)}
	createService(t, svc)
	active := waitKindServiceReady(t, svc)
	rc := &rayv1.RayCluster{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: active}, rc)).To(Succeed())
	waitKindReady(t, rc, 3)
	head := headPod(g, rc)
	endpoints := watchEndpoints(t, ns, svc.Name+"-serve-svc")
	g.Eventually(endpoints.sawReady, kindTimeout, time.Second).Should(BeTrue())

	updateService(t, svc, func(s *rayv1.RayService) {
		s.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.46.0"
	})
	g.Eventually(func(g Gomega) {
		pods := workerPods(g, rc, w.GroupName)
		g.Expect(pods).To(HaveLen(3))
		for _, p := range pods {
			g.Expect(runsImage(&p, "rayproject/ray:2.46.0")).To(BeTrue(), "pod %s runs the new image", p.Name)
			g.Expect(podReady(&p)).To(BeTrue(), "pod %s ready", p.Name)
		}
		g.Expect(getService(g, svc).Status.PendingServiceStatus.RayClusterName).To(BeEmpty())
	}, 2*kindTimeout, time.Second).Should(Succeed())
	g.Expect(clusters.created()).To(ConsistOf(active), "no second cluster")
	g.Expect(headPod(g, rc).UID).To(Equal(head.UID), "the head is the same pod")
	g.Expect(endpoints.drops()).To(BeEmpty(), "moments the serve Service had no ready endpoint")
	g.Expect(eventMessages(g, rc, raycluster.EventDrainingWorker)).To(HaveLen(3), "each old worker drained once")
	expectOperatorNeverForbidden(t)
}

// KubeRay v1.7's incremental upgrade sample (interval cut to 1 s) with excludeHeadPodFromServeSvc and one worker
// at least, on real kubelets and the fake Ray's Serve: the new cluster starts at target capacity 0, where no
// replica runs, so no worker has a Serve proxy and the head is left out: it has no serve endpoint until its
// first capacity step. The upgrade goes on all the same, traffic moving only where a proxy serves and never
// above the new cluster's capacity, and ends on exactly one new cluster.
func TestKindRayServiceIncrementalUpgrade(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	ns := kindNamespace(t)
	playGatewayController(t, ns)
	clusters := watchCreations(t, ns, &rayv1.RayClusterList{})
	svc := incrementalSample(t, ns, 1, 0, 0)
	svc.Spec.ExcludeHeadPodFromServeSvc = true
	fitKindSpec(&svc.Spec.RayClusterSpec)
	svc.Spec.RayClusterSpec.WorkerGroupSpecs[0].MinReplicas = ptr.To[int32](1)
	createService(t, svc)
	old := waitKindServiceReady(t, svc)
	splits := watchSplits(t, svc)

	updateService(t, svc, func(s *rayv1.RayService) {
		s.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.52.0"
	})
	var cur *rayv1.RayService
	g.Eventually(func(g Gomega) {
		cur = getService(g, svc)
		g.Expect(cur.Status.ActiveServiceStatus.RayClusterName).NotTo(Equal(old))
		g.Expect(cur.Status.PendingServiceStatus.RayClusterName).To(BeEmpty())
	}, 3*kindTimeout, time.Second).Should(Succeed())
	next := cur.Status.ActiveServiceStatus.RayClusterName
	g.Expect(clusters.created()).To(ConsistOf(old, next), "exactly one new cluster")
	seen, _ := splits.seen()
	g.Expect(seen).NotTo(BeEmpty())
	for _, s := range seen {
		g.Expect(s.ActiveCapacity+s.PendingCapacity).To(BeNumerically("<=", 110), "capacities %+v", s)
		if s.Pending != "" {
			g.Expect(s.PendingTraffic).To(BeNumerically("<=", s.PendingCapacity), "traffic above the new cluster's capacity: %+v", s)
		}
	}
	g.Expect(ptr.Deref(cur.Status.ActiveServiceStatus.TrafficRoutedPercent, 0)).To(BeEquivalentTo(100))
	expectOperatorNeverForbidden(t)
}

// Recreate with workerDrain, without GCS fault tolerance: the head is replaced beside the workers, so their Ray
// nodes go with its GCS; a worker held for deletion is released without waiting for a drain that cannot
// finish (never DrainTimedOut), and every pod is replaced once, running the new image.
func TestKindRecreateWithWorkerDrain(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	rc := kindRayCluster(kindNamespace(t), "recreate", 2)
	withUpgrade(rc, rayv1.RayClusterRecreate, 600)
	create(t, rc)
	waitKindReady(t, rc, 2)
	before := uids(clusterPods(g, rc))
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image = kindUpgradeImage
		c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = kindUpgradeImage
	})
	g.Eventually(func(g Gomega) {
		pods := clusterPods(g, rc)
		g.Expect(pods).To(HaveLen(3))
		for _, p := range pods {
			g.Expect(before[p.Name]).NotTo(Equal(p.UID), "pod %s replaced", p.Name)
			g.Expect(p.DeletionTimestamp).To(BeNil())
			g.Expect(podReady(&p)).To(BeTrue(), "pod %s ready", p.Name)
			g.Expect(runsImage(&p, kindUpgradeImage)).To(BeTrue(), "pod %s runs the new image", p.Name)
		}
	}, kindTimeout, time.Second).Should(Succeed())
	created, deleted := ledger.counts(t, rc)
	g.Expect(created).To(Equal(3+3), "every pod replaced once")
	g.Expect(deleted).To(Equal(3))
	g.Expect(eventCount(g, rc, raycluster.EventDrainTimedOut)).To(BeZero())
	g.Expect(eventMessages(g, rc, raycluster.EventDrainedWorker)).To(HaveLen(2), "each old worker released once")
	expectOperatorNeverForbidden(t)
}

// RollingUpdate with maxSurge 1 and maxUnavailable 0 and workerDrain, on real kubelets: a new worker starts and
// is Ready before an old one is taken out, so the group never has fewer available workers than its replicas
// nor more than one extra, each old worker is drained once, and at least all but one keep their pod.
func TestKindRollingUpdateWithSurge(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	rc := kindRayCluster(kindNamespace(t), "surge", 2)
	withUpgrade(rc, rayv1.RayClusterRollingUpdate, 300)
	rc.Spec.WorkerGroupSpecs[0].RollingUpdate = &rayv1.WorkerGroupRollingUpdate{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1))}
	create(t, rc)
	waitKindReady(t, rc, 2)
	old := workerUIDs(g, rc, "workergroup")
	tl := watchTimeline(t, rc)
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = kindUpgradeImage
	})
	g.Eventually(func(g Gomega) {
		pods := workerPods(g, rc, "workergroup")
		g.Expect(pods).To(HaveLen(2))
		for _, p := range pods {
			g.Expect(runsImage(&p, kindUpgradeImage)).To(BeTrue(), "pod %s runs the new image", p.Name)
			g.Expect(available(&p)).To(BeTrue(), "pod %s available", p.Name)
		}
	}, kindTimeout, time.Second).Should(Succeed())
	b := tl.rollBounds(old)
	g.Expect(b.newWorker).To(BeTrue(), "no extra pod was started")
	g.Expect(b.mostWorkers).To(Equal(3), "workers at most: replicas + maxSurge")
	g.Expect(b.fewestAvailable).To(Equal(2), "available workers never below replicas")
	kept := 0
	for _, p := range workerPods(g, rc, "workergroup") {
		if old[p.UID] {
			kept++
		}
	}
	g.Expect(kept).To(BeNumerically(">=", 1), "workers updated in place")
	g.Expect(eventMessages(g, rc, raycluster.EventDrainingWorker)).To(HaveLen(2), "each old worker drained once")
	expectOperatorNeverForbidden(t)
}

// The rest of docs/upgrades.md on real kubelets, one GCS fault tolerant cluster of two groups under
// RollingUpdate with workerDrain: an image change updates the head first, then group first (maxUnavailable 1) in full, and only
// then group second, whose partition of 1 keeps one pod on the old image; every updated pod is the same pod
// with its Ray container restarted once, each worker drained once before. Then a named scale-down of group
// first drains and removes exactly the pod named, and removing group second drains both its pods before the
// group's CloneSet goes.
func TestKindRollingUpdateOrderPartitionAndDrainedRemovals(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	const oldImage = "rayproject/ray:2.46.0"
	rc := kindRayCluster(kindNamespace(t), "order", 2)
	// The head is updated first: with GCS fault tolerance the workers' Ray nodes outlive its restart and are
	// drained before theirs (without it, kray restarts them at once: kind_heal_test.go).
	faultTolerant(t, rc)
	withUpgrade(rc, rayv1.RayClusterRollingUpdate, 300)
	first := &rc.Spec.WorkerGroupSpecs[0]
	first.GroupName = "first"
	first.RollingUpdate = &rayv1.WorkerGroupRollingUpdate{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	second := first.DeepCopy()
	second.GroupName = "second"
	second.RollingUpdate = &rayv1.WorkerGroupRollingUpdate{Partition: ptr.To(intstr.FromInt32(1))}
	rc.Spec.WorkerGroupSpecs = append(rc.Spec.WorkerGroupSpecs, *second)
	create(t, rc)
	waitKindReady(t, rc, 4)
	before := uids(clusterPods(g, rc))
	tl := watchTimeline(t, rc)

	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image = kindUpgradeImage
		for i := range c.Spec.WorkerGroupSpecs {
			c.Spec.WorkerGroupSpecs[i].Template.Spec.Containers[0].Image = kindUpgradeImage
		}
	})
	updated := func(p *corev1.Pod) bool { return runsImage(p, kindUpgradeImage) && podReady(p) }
	g.Eventually(func(g Gomega) {
		up := condition(get(g, rc), constants.ConditionPodsUpToDate)
		g.Expect(up).NotTo(BeNil())
		g.Expect(up.Status).To(Equal(metav1.ConditionTrue), "%s: %s", up.Reason, up.Message)
		g.Expect(updated(headPod(g, rc))).To(BeTrue(), "the head runs the new image")
		for _, p := range workerPods(g, rc, "first") {
			g.Expect(updated(&p)).To(BeTrue(), "pod %s runs the new image", p.Name)
		}
		var images []string
		for _, p := range workerPods(g, rc, "second") {
			g.Expect(podReady(&p)).To(BeTrue(), "pod %s ready", p.Name)
			images = append(images, p.Spec.Containers[0].Image)
		}
		g.Expect(images).To(ConsistOf(kindUpgradeImage, oldImage), "partition 1 keeps one pod of group second")
	}, 2*kindTimeout, time.Second).Should(Succeed())
	g.Expect(uids(clusterPods(g, rc))).To(Equal(before), "the same pods, updated in place")
	for _, p := range clusterPods(g, rc) {
		want := int32(1)
		if p.Spec.Containers[0].Image == oldImage {
			want = 0
		}
		g.Expect(rayContainerStatus(&p).RestartCount).To(Equal(want), "restarts of pod %s", p.Name)
	}
	g.Expect(eventMessages(g, rc, raycluster.EventDrainingWorker)).To(HaveLen(3), "one drain per updated worker")
	g.Expect(eventMessages(g, rc, raycluster.EventDrainingWorker)).To(HaveEach(HaveSuffix("before the pod is updated in place")))

	// Order, from the watch: the head updated before any worker changed image, group first done before group
	// second started.
	headDone, firstStarted, firstDone, secondStarted := -1, -1, -1, -1
	tl.replay(func(step int, alive map[string]*corev1.Pod) {
		newFirst, readyFirst := 0, 0
		for _, p := range alive {
			switch group := p.Labels[constants.LabelGroup]; {
			case group == constants.HeadGroupName && headDone < 0 && updated(p):
				headDone = step
			case group == "first":
				if p.Spec.Containers[0].Image == kindUpgradeImage {
					newFirst++
				}
				if updated(p) {
					readyFirst++
				}
			case group == "second" && secondStarted < 0 && p.Spec.Containers[0].Image == kindUpgradeImage:
				secondStarted = step
			}
		}
		if firstStarted < 0 && newFirst > 0 {
			firstStarted = step
		}
		if firstDone < 0 && readyFirst == 2 {
			firstDone = step
		}
	})
	g.Expect(headDone).To(BeNumerically(">=", 0), "the watch never saw the head updated")
	g.Expect(firstStarted).To(BeNumerically(">", headDone), "group first started before the head was updated")
	g.Expect(firstDone).To(BeNumerically(">=", 0), "the watch never saw group first updated")
	g.Expect(secondStarted).To(BeNumerically(">", firstDone), "group second started before group first was done")

	// A named scale-down of group first: the pod named is drained, then gone; the other keeps its pod.
	firsts := workerPods(g, rc, "first")
	victim, kept := firsts[0].Name, map[string]types.UID{firsts[1].Name: firsts[1].UID}
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](1)
		c.Spec.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete = []string{victim}
	})
	g.Eventually(func(g Gomega) {
		g.Expect(uids(workerPods(g, rc, "first"))).To(Equal(kept))
	}, kindTimeout, time.Second).Should(Succeed())
	g.Expect(eventMessages(g, rc, raycluster.EventDrainingWorker)).To(ContainElement(
		MatchRegexp("^Worker pod " + victim + ": asked Ray to drain node [0-9a-f]+ before the pod is deleted$")))

	// Group second removed: both its pods drained, then the pods and the CloneSet gone.
	seconds := workerPods(g, rc, "second")
	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs = c.Spec.WorkerGroupSpecs[:1] })
	g.Eventually(func(g Gomega) {
		g.Expect(workerPods(g, rc, "second")).To(BeEmpty())
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: rc.Namespace, Name: names.WorkerCloneSet(rc.Name, "second")}, &kruisev1alpha1.CloneSet{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "group second's CloneSet: %v", err)
	}, kindTimeout, time.Second).Should(Succeed())
	draining := eventMessages(g, rc, raycluster.EventDrainingWorker)
	for _, p := range seconds {
		g.Expect(draining).To(ContainElement(MatchRegexp("^Worker pod "+p.Name+": asked Ray to drain node [0-9a-f]+ before the pod is deleted$")), "pod %s drained before removal", p.Name)
	}
	g.Expect(eventCount(g, rc, raycluster.EventDrainTimedOut)).To(BeZero())
	g.Expect(ledger.deletedNames(t, rc)).To(ConsistOf(append([]string{victim}, podNames(seconds)...)))
	expectOperatorNeverForbidden(t)
}
