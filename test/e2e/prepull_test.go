package e2e

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/pkg/constants"
)

// needImagePulling skips a test that needs kruise-manager's image pulling gates (hack/cluster.sh turns them on
// unless KRAY_KRUISE_IMAGE_PULLING=false).
func needImagePulling(t *testing.T) {
	t.Helper()
	if os.Getenv("KRAY_KRUISE_IMAGE_PULLING") == "false" {
		t.Skip("needs Kruise's KruiseDaemon and ImagePullJobGate gates")
	}
}

// pullJobs returns the ImagePullJobs in ns that match opts, by image.
func pullJobs(g Gomega, ns string, opts ...client.ListOption) map[string]kruisev1alpha1.ImagePullJob {
	var list kruisev1alpha1.ImagePullJobList
	g.Expect(k8s.List(context.Background(), &list, append(opts, client.InNamespace(ns))...)).To(Succeed())
	out := map[string]kruisev1alpha1.ImagePullJob{}
	for _, j := range list.Items {
		out[j.Spec.Image+" "+selectorText(j.Spec.Selector)] = j
	}
	return out
}

func selectorText(s *kruisev1alpha1.ImagePullJobNodeSelector) string {
	if s == nil {
		return "all nodes"
	}
	return metav1.FormatLabelSelector(&s.LabelSelector)
}

// kray.io/image-prepull: "true" gives a running cluster Kruise ImagePullJobs that keep its Ray images pulled
// on the nodes its groups can run on (the head's on every node, the workers' on the nodes of their
// nodeSelector), which kruise-manager takes up (one pull task per matching node); a new worker image gets a
// job of its own and the old one goes; removing the annotation removes them; no pod restarts.
func TestImagePrepull(t *testing.T) {
	t.Parallel()
	needImagePulling(t)
	g := NewWithT(t)
	ns := namespace(t)
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	sample.Spec.WorkerGroupSpecs[0].Template.Spec.NodeSelector = map[string]string{"kray.local/kwok-node": "true"}
	rc := create(t, sample)
	waitReady(t, rc, 2)
	before := uids(clusterPods(g, rc))
	var nodes corev1.NodeList
	g.Expect(k8s.List(context.Background(), &nodes)).To(Succeed())
	var workerNodes corev1.NodeList
	g.Expect(k8s.List(context.Background(), &workerNodes, client.MatchingLabels{"kray.local/kwok-node": "true"})).To(Succeed())

	update(t, rc, func(c *rayv1.RayCluster) {
		c.Annotations = map[string]string{constants.AnnotationImagePrepull: "true"}
	})
	image := sample.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image
	headKey, workerKey := sample.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image+" all nodes", image+" kray.local/kwok-node=true"
	owned := client.MatchingLabels{constants.LabelCluster: rc.Name}
	g.Eventually(func(g Gomega) {
		jobs := pullJobs(g, ns, owned)
		g.Expect(jobs).To(HaveLen(2))
		g.Expect(jobs).To(HaveKey(headKey))
		g.Expect(jobs).To(HaveKey(workerKey))
		g.Expect(jobs[headKey].Status.Desired).To(Equal(int32(len(nodes.Items))), "kruise-manager pulls the head's image on every node")
		g.Expect(jobs[workerKey].Status.Desired).To(Equal(int32(len(workerNodes.Items))), "and the workers' on their nodes")
		for _, j := range jobs {
			g.Expect(metav1.GetControllerOf(&j).Name).To(Equal(rc.Name))
			g.Expect(j.Spec.CompletionPolicy.Type).To(Equal(kruisev1alpha1.Never))
		}
	}, readyTimeout, poll).Should(Succeed())

	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = newImage
	})
	g.Eventually(func(g Gomega) {
		jobs := pullJobs(g, ns, owned)
		g.Expect(jobs).To(HaveLen(2))
		g.Expect(jobs).To(HaveKey(headKey))
		g.Expect(jobs).To(HaveKey(newImage+" kray.local/kwok-node=true"), "the new worker image is pulled")
	}, readyTimeout, poll).Should(Succeed())

	update(t, rc, func(c *rayv1.RayCluster) { delete(c.Annotations, constants.AnnotationImagePrepull) })
	g.Eventually(func(g Gomega) {
		g.Expect(pullJobs(g, ns, owned)).To(BeEmpty())
	}, readyTimeout, poll).Should(Succeed())
	g.Expect(uids(clusterPods(g, rc))).To(Equal(before), "turning pre-pull on and off and a new image restarted no pod (upgradeStrategy None)")
	// Events are sent after the status write, so the last one may reach the API server after the jobs are gone.
	g.Eventually(func(g Gomega) {
		g.Expect(eventMessages(g, rc, raycluster.EventDeletedImagePullJob)).To(HaveLen(3), "the old worker image's job, then both left")
	}, readyTimeout, poll).Should(Succeed())
}

// A rolling in-place upgrade pulls the new image before pods are updated: with kray's RollingUpdate (one pod
// at a time) Kruise's CloneSet pre-download creates an ImagePullJob of the new image for the group's nodes.
func TestRollingUpgradePreDownloadsTheNewImage(t *testing.T) {
	t.Parallel()
	needImagePulling(t)
	g := NewWithT(t)
	ns := namespace(t)
	sample := sampleWithStrategy(t, ns, rayv1.RayClusterRollingUpdate)
	w := &sample.Spec.WorkerGroupSpecs[0]
	w.Replicas, w.MaxReplicas = ptr.To[int32](4), ptr.To[int32](10)
	w.RollingUpdate = &rayv1.WorkerGroupRollingUpdate{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	rc := create(t, sample)
	waitReady(t, rc, 4)
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = newImage
	})
	g.Eventually(func(g Gomega) {
		var list kruisev1alpha1.ImagePullJobList
		g.Expect(k8s.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		var images []string
		for _, j := range list.Items {
			if ref := metav1.GetControllerOf(&j); ref != nil && ref.Kind == "CloneSet" {
				images = append(images, j.Spec.Image)
			}
		}
		g.Expect(images).To(ContainElement(newImage), "Kruise pre-downloads the new image for the CloneSet's update")
	}, readyTimeout, poll).Should(Succeed())
}
