package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedv1alpha1 "github.com/kray-project/kray/api/schedulerplugins/v1alpha1"
	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/batchscheduler"
	"github.com/kray-project/kray/pkg/constants"
)

// gangSlot is the extended resource of the gang tests' nodes: each Ray pod of a test cluster asks for one,
// so a node's slots are how many of them fit.
const gangSlot = corev1.ResourceName("kray.local/gang-slot")

// needStarted skips a test unless hack/e2e.sh set env (it started or installed what the test needs) and the
// operator runs on the local cluster, where the test can restart it.
func needStarted(t *testing.T, env, what string) {
	t.Helper()
	if os.Getenv(env) == "" || !localCluster() {
		t.Skip("needs " + what + " that hack/e2e.sh sets up (" + env + "), and restarts the operator")
	}
}

// batchOperator restarts the operator with --batch-scheduler=scheduler and, when rights names one, the
// kustomize component of the rights that scheduler needs (config/<rights>), and the plain operator again when
// the test ends.
func batchOperator(t *testing.T, scheduler, rights string) {
	t.Helper()
	if rights != "" {
		out, err := exec.Command("kubectl", "apply", "-k", filepath.Join(repoRoot, "config", rights)).CombinedOutput()
		if err != nil {
			t.Fatalf("apply config/%s: %v\n%s", rights, err, out)
		}
	}
	hack(t, "operator.sh", "stop")
	t.Cleanup(func() { hack(t, "operator.sh", "stop"); hack(t, "operator.sh", "start") })
	hackEnv(t, []string{"KRAY_OPERATOR_ARGS=" + os.Getenv("KRAY_OPERATOR_ARGS") + " --batch-scheduler=" + scheduler}, "operator.sh", "start")
}

// gangNode makes a kwok node that only the test's pods go to (a taint they tolerate, a label they select)
// with slots of gangSlot, and deletes it when the test ends.
func gangNode(t *testing.T, name string, slots int) {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "type": "kwok"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "kray.local/gang", Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
	}
	if err := k8s.Create(ctx, node); err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })
	setSlots(t, name, slots)
}

// setSlots sets the node's capacity and allocatable: slots of gangSlot, and room for everything else.
func setSlots(t *testing.T, name string, slots int) {
	t.Helper()
	res := map[string]string{string(gangSlot): fmt.Sprint(slots), "cpu": "100", "memory": "1000Gi", "pods": "110"}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"capacity": res, "allocatable": res}})
	if err := k8s.Status().Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("set the slots of node %s: %v", name, err)
	}
}

// onGangNode is the sample RayCluster (a head and two workers) in ns, each pod asking for one slot of node.
func onGangNode(t *testing.T, ns, node string, gang bool) *rayv1.RayCluster {
	rc := loadSample(t, "ray-cluster.sample.yaml", ns)
	if gang {
		rc.Labels = map[string]string{batchscheduler.LabelGangScheduling: "true"}
	}
	placeOnGangNode(&rc.Spec, node)
	return rc
}

// placeOnGangNode makes each pod of the cluster spec ask for one slot of node, and go nowhere else.
func placeOnGangNode(spec *rayv1.RayClusterSpec, node string) {
	place := func(tmpl *corev1.PodTemplateSpec) {
		tmpl.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
		tmpl.Spec.Tolerations = append(tmpl.Spec.Tolerations, corev1.Toleration{Key: "kray.local/gang", Operator: corev1.TolerationOpExists})
		c := &tmpl.Spec.Containers[0]
		for _, l := range []*corev1.ResourceList{&c.Resources.Requests, &c.Resources.Limits} {
			if *l == nil {
				*l = corev1.ResourceList{}
			}
			(*l)[gangSlot] = resource.MustParse("1")
		}
	}
	place(&spec.HeadGroupSpec.Template)
	for i := range spec.WorkerGroupSpecs {
		place(&spec.WorkerGroupSpecs[i].Template)
	}
}

// bound counts the cluster's pods that a scheduler bound to a node.
func bound(g Gomega, rc *rayv1.RayCluster) int {
	n := 0
	for _, p := range clusterPods(g, rc) {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

func podGroupOf(g Gomega, rc *rayv1.RayCluster) *schedv1alpha1.PodGroup {
	pg := &schedv1alpha1.PodGroup{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: rc.Namespace, Name: rc.Name}, pg); err != nil {
		return nil
	}
	return pg
}

// With the real scheduler-plugins coscheduling scheduler: a gang of three pods on a node with room for two
// gets none bound (an un-ganged cluster beside it gets its two), all three once a third slot comes; the
// PodGroup follows a scale-up, goes while the cluster is suspended and comes back with it.
func TestGangIsScheduledAllOrNothing(t *testing.T) {
	needStarted(t, "KRAY_E2E_SCHEDULER_PLUGINS", "the scheduler-plugins scheduler")
	g := NewWithT(t)
	ns := namespace(t)
	batchOperator(t, batchscheduler.SchedulerPlugins, "scheduler-plugins")
	// Nodes of the test's own, named after its namespace: pods a failed earlier run left bound to a node of
	// the same name would take its slots.
	gangNodeName, singleNodeName := ns+"-gang", ns+"-single"
	gangNode(t, gangNodeName, 2)
	gangNode(t, singleNodeName, 2)

	rc := create(t, onGangNode(t, ns, gangNodeName, true))
	single := onGangNode(t, ns, singleNodeName, false)
	single.Name = "single"
	single.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](1)
	create(t, single)
	g.Eventually(func(g Gomega) {
		pg := podGroupOf(g, rc)
		g.Expect(pg).NotTo(BeNil())
		g.Expect(pg.Spec.MinMember).To(Equal(int32(3)))
		g.Expect(pg.Spec.MinResources).To(HaveKeyWithValue(gangSlot, resource.MustParse("3")))
		g.Expect(clusterPods(g, rc)).To(HaveLen(3))
		g.Expect(bound(g, single)).To(Equal(2), "the un-ganged cluster's pods bind one by one")
	}, readyTimeout, poll).Should(Succeed())
	for _, p := range clusterPods(g, rc) {
		g.Expect(p.Spec.SchedulerName).To(Equal(batchscheduler.SchedulerPluginsName))
		g.Expect(p.Labels).To(HaveKeyWithValue(batchscheduler.LabelPodGroup, rc.Name))
	}
	g.Consistently(func(g Gomega) { g.Expect(bound(g, rc)).To(BeZero()) }, 15*time.Second, time.Second).Should(Succeed(), "two of three fit, and none may start")
	g.Eventually(func(g Gomega) {
		c := podsScheduled(g, rc)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(constants.ReasonWaitingForScheduler))
		g.Expect(c.Message).To(HavePrefix("3 of 3 pods wait for scheduler-plugins; scheduler-plugins says of "))
	}, readyTimeout, poll).Should(Succeed(), "the gang's wait is reported")

	setSlots(t, gangNodeName, 3)
	waitReady(t, rc, 2)
	g.Expect(bound(g, rc)).To(Equal(3))
	g.Eventually(func(g Gomega) { g.Expect(podsScheduled(g, rc).Status).To(Equal(metav1.ConditionTrue)) }, readyTimeout, poll).Should(Succeed())

	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](3) })
	g.Eventually(func(g Gomega) { g.Expect(podGroupOf(g, rc).Spec.MinMember).To(Equal(int32(4))) }, readyTimeout, poll).Should(Succeed())
	setSlots(t, gangNodeName, 4)
	waitReady(t, rc, 3)

	// A lost worker is replaced inside the running gang: its siblings run, so the new pod binds alone.
	lost := workerPods(g, rc, rc.Spec.WorkerGroupSpecs[0].GroupName)[0]
	g.Expect(k8s.Delete(context.Background(), &lost)).To(Succeed())
	g.Eventually(func(g Gomega) {
		pods := workerPods(g, rc, rc.Spec.WorkerGroupSpecs[0].GroupName)
		g.Expect(pods).To(HaveLen(3))
		for _, p := range pods {
			g.Expect(p.UID).NotTo(Equal(lost.UID))
			g.Expect(p.Spec.NodeName).To(Equal(gangNodeName))
		}
	}, readyTimeout, poll).Should(Succeed())
	waitReady(t, rc, 3)

	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.Suspend = ptr.To(true) })
	g.Eventually(func(g Gomega) {
		g.Expect(podGroupOf(g, rc)).To(BeNil())
		g.Expect(clusterPods(g, rc)).To(BeEmpty())
	}, readyTimeout, poll).Should(Succeed())
	update(t, rc, func(c *rayv1.RayCluster) { c.Spec.Suspend = ptr.To(false) })
	waitReady(t, rc, 3)
	g.Expect(podGroupOf(g, rc)).NotTo(BeNil())
}

// podsScheduled is the cluster's PodsScheduled condition as last written.
func podsScheduled(g Gomega, rc *rayv1.RayCluster) *metav1.Condition {
	cur := &rayv1.RayCluster{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(rc), cur)).To(Succeed())
	return condition(cur, constants.ConditionPodsScheduled)
}

// A K8sJobMode RayJob under scheduler-plugins (which KubeRay refuses): its cluster is one gang of its own
// pods, and its submitter goes to the same scheduler outside the gang, so it is never held for a quorum that
// waits for it; the job completes through the fake dashboard.
func TestGangRayJobCompletes(t *testing.T) {
	needStarted(t, "KRAY_E2E_SCHEDULER_PLUGINS", "the scheduler-plugins scheduler")
	needFakeDashboard(t)
	g := NewWithT(t)
	ns := namespace(t)
	batchOperator(t, batchscheduler.SchedulerPlugins, "scheduler-plugins")
	node := ns + "-gang"
	gangNode(t, node, 2)
	player := playSubmitters(t, ns)
	job := createJob(t, rayJob(t, ns, "ganged", rayv1.K8sJobMode, func(j *rayv1.RayJob) {
		j.Labels = map[string]string{batchscheduler.LabelGangScheduling: "true"}
		placeOnGangNode(j.Spec.RayClusterSpec, node)
	}))
	cur := waitJobState(t, job, rayv1.JobDeploymentStatusComplete)
	g.Expect(player.errors()).To(BeEmpty())
	g.Expect(cur.Status.JobStatus).To(Equal(rayv1.JobStatusSucceeded))
	pg := &schedv1alpha1.PodGroup{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cur.Status.RayClusterName}, pg)).To(Succeed())
	g.Expect(pg.Spec.MinMember).To(Equal(int32(2)), "the head and the worker, not the submitter")
	sub := &batchv1.Job{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "ganged"}, sub)).To(Succeed())
	g.Expect(sub.Spec.Template.Spec.SchedulerName).To(Equal(batchscheduler.SchedulerPluginsName))
	g.Expect(sub.Spec.Template.Labels).NotTo(HaveKey(batchscheduler.LabelPodGroup))
}
