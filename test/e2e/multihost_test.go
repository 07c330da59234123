package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

// replicaIndices returns the replica index label of each of the group's live pods.
func replicaIndices(g Gomega, rc *rayv1.RayCluster, group string) []string {
	var out []string
	for _, p := range workerPods(g, rc, group) {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Labels[constants.LabelReplicaIndex])
		}
	}
	return out
}

// replicasOf groups the group's live pods by replica name: name -> host indices, and name -> replica index.
func replicasOf(g Gomega, rc *rayv1.RayCluster, group string) (map[string][]string, map[string]string) {
	hosts, index := map[string][]string{}, map[string]string{}
	for _, p := range workerPods(g, rc, group) {
		if p.DeletionTimestamp != nil {
			continue
		}
		name := p.Labels[constants.LabelReplicaName]
		hosts[name] = append(hosts[name], p.Labels[constants.LabelHostIndex])
		g.Expect(index).NotTo(HaveKeyWithValue(name, Not(Equal(p.Labels[constants.LabelReplicaIndex]))), "hosts of replica %s disagree on its index", name)
		index[name] = p.Labels[constants.LabelReplicaIndex]
	}
	return hosts, index
}

// KubeRay's TestRayClusterSingleHostMultiSlice, behind its gate: by default (KubeRay v1.5.0's too) a
// single-host worker carries no replica index; with RayMultiHostIndexing on, every worker gets one, a
// replacement takes the freed index, and a scale-up continues the sequence.
func TestReplicaIndexSingleHost(t *testing.T) {
	if !localCluster() {
		t.Skip("restarts the operator with a feature gate through hack/operator.sh")
	}
	g := NewWithT(t)
	ns := namespace(t)
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	group(sample).Replicas, group(sample).MaxReplicas = ptr.To[int32](3), ptr.To[int32](10)
	rc := create(t, sample)
	waitReady(t, rc, 3)
	name := group(rc).GroupName
	g.Consistently(func(g Gomega) { g.Expect(replicaIndices(g, rc, name)).To(And(HaveLen(3), HaveEach(BeEmpty()))) }, 2*time.Second, poll).Should(Succeed())

	hack(t, "operator.sh", "stop")
	t.Cleanup(func() { hack(t, "operator.sh", "stop"); hack(t, "operator.sh", "start") })
	hackEnv(t, []string{"KRAY_OPERATOR_ARGS=" + os.Getenv("KRAY_OPERATOR_ARGS") + " --feature-gates=RayMultiHostIndexing=true"}, "operator.sh", "start")
	g.Eventually(func(g Gomega) { g.Expect(replicaIndices(g, rc, name)).To(ConsistOf("0", "1", "2")) }, readyTimeout, poll).Should(Succeed())
	for _, p := range workerPods(g, rc, name) {
		g.Expect(p.Labels).NotTo(HaveKey(constants.LabelReplicaName))
		g.Expect(p.Labels).NotTo(HaveKey(constants.LabelHostIndex))
		if p.Labels[constants.LabelReplicaIndex] == "1" {
			g.Expect(k8s.Delete(context.Background(), &p)).To(Succeed())
		}
	}
	g.Eventually(func(g Gomega) { g.Expect(replicaIndices(g, rc, name)).To(ConsistOf("0", "1", "2")) }, readyTimeout, poll).Should(Succeed())
	update(t, rc, func(c *rayv1.RayCluster) { group(c).Replicas = ptr.To[int32](4) })
	g.Eventually(func(g Gomega) { g.Expect(replicaIndices(g, rc, name)).To(ConsistOf("0", "1", "2", "3")) }, readyTimeout, poll).Should(Succeed())
}

// KubeRay's TestRayClusterMultiHostMultiSlice: numOfHosts 4 makes replicas of 4 pods sharing a name and an
// index with host indices 0-3; scaling removes and adds whole replicas; deleting one host recreates its
// whole replica under the same index; the headless worker Service exists.
func TestMultiHostReplicas(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	sample := loadSample(t, "ray-cluster.sample.yaml", ns)
	w := group(sample)
	w.Replicas, w.MinReplicas, w.MaxReplicas, w.NumOfHosts = ptr.To[int32](2), ptr.To[int32](0), ptr.To[int32](5), 4
	rc := create(t, sample)
	waitReady(t, rc, 8)
	name := w.GroupName
	whole := func(g Gomega, indices ...string) map[string][]string {
		hosts, index := replicasOf(g, rc, name)
		g.Expect(hosts).To(HaveLen(len(indices)))
		for replica, hs := range hosts {
			g.Expect(replica).To(HavePrefix(name+"-"), "a pod without a replica")
			g.Expect(hs).To(ConsistOf("0", "1", "2", "3"), "replica %s", replica)
		}
		var got []string
		for _, i := range index {
			got = append(got, i)
		}
		g.Expect(got).To(ConsistOf(indices))
		return hosts
	}
	g.Eventually(func(g Gomega) { whole(g, "0", "1") }, readyTimeout, poll).Should(Succeed())
	svc := &corev1.Service{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: rc.Name + "-headless"}, svc)).To(Succeed())
	g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
	g.Expect(svc.Spec.PublishNotReadyAddresses).To(BeTrue())

	update(t, rc, func(c *rayv1.RayCluster) { group(c).Replicas = ptr.To[int32](1) })
	waitReady(t, rc, 4)
	var kept map[string][]string
	g.Eventually(func(g Gomega) { kept = whole(g, "0") }, readyTimeout, poll).Should(Succeed())
	update(t, rc, func(c *rayv1.RayCluster) { group(c).Replicas = ptr.To[int32](3) })
	waitReady(t, rc, 12)
	g.Eventually(func(g Gomega) { whole(g, "0", "1", "2") }, readyTimeout, poll).Should(Succeed())
	_, index := replicasOf(g, rc, name)
	for replica := range kept {
		g.Expect(index).To(HaveKeyWithValue(replica, "0"), "scaling up touched replica %s", replica)
	}

	// Delete one host of replica 1: its whole replica is recreated, under index 1 with a new name.
	var victim corev1.Pod
	for _, p := range workerPods(g, rc, name) {
		if p.Labels[constants.LabelReplicaIndex] == "1" && p.Labels[constants.LabelHostIndex] == "2" {
			victim = p
		}
	}
	oldName := victim.Labels[constants.LabelReplicaName]
	before := uids(workerPods(g, rc, name))
	g.Expect(k8s.Delete(context.Background(), &victim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		hosts := whole(g, "0", "1", "2")
		g.Expect(hosts).NotTo(HaveKey(oldName))
		g.Expect(workerPods(g, rc, name)).To(HaveLen(12))
	}, readyTimeout, poll).Should(Succeed())
	// Only the broken replica's 4 hosts were replaced.
	replaced := 0
	for _, p := range workerPods(g, rc, name) {
		if _, ok := before[p.Name]; !ok {
			replaced++
		}
	}
	g.Expect(replaced).To(Equal(4))
	waitReady(t, rc, 12)
}

// The autoscaler removes a multi-host replica by lowering replicas by one and naming one of its hosts (as
// it does for any group): exactly that replica's hosts go, the other replica is untouched.
func TestMultiHostAutoscalerScaleDown(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	rc := loadSample(t, "ray-cluster.autoscaler.yaml", ns)
	w := group(rc)
	w.Replicas, w.MinReplicas, w.MaxReplicas, w.NumOfHosts = ptr.To[int32](2), ptr.To[int32](0), ptr.To[int32](4), 2
	create(t, rc)
	waitReady(t, rc, 4)
	var hosts map[string][]string
	g.Eventually(func(g Gomega) {
		hosts, _ = replicasOf(g, rc, w.GroupName)
		g.Expect(hosts).To(HaveLen(2))
	}, readyTimeout, poll).Should(Succeed())
	var victim corev1.Pod
	for _, p := range workerPods(g, rc, w.GroupName) {
		if p.Labels[constants.LabelReplicaIndex] == "1" && p.Labels[constants.LabelHostIndex] == "1" {
			victim = p
		}
	}
	var doomed, kept []string
	for _, p := range workerPods(g, rc, w.GroupName) {
		if p.Labels[constants.LabelReplicaName] == victim.Labels[constants.LabelReplicaName] {
			doomed = append(doomed, p.Name)
		} else {
			kept = append(kept, p.Name)
		}
	}
	as := newAutoscaler(t, rc)
	as.patch(t, `[{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1},
		{"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": [`+quoted(victim.Name)+`]}}]`)
	waitReady(t, rc, 2)
	g.Expect(podNames(workerPods(g, rc, w.GroupName))).To(ConsistOf(kept))
	g.Expect(ledger.deletedNames(t, rc)).To(ConsistOf(doomed))
	created, _ := ledger.counts(t, rc)
	g.Expect(created).To(Equal(1 + 4))
}
