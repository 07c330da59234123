package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// hackEnv runs a repository script with extra environment variables.
func hackEnv(t *testing.T, env []string, script string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot, "hack", script), args...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/%s %s: %v\n%s", script, strings.Join(args, " "), err, out)
	}
}

// kube-apiserver restarts mid scale-up: every watch breaks, and the operator and Kruise resume and converge
// with each pod created once.
func TestAPIServerRestartDuringScaleUp(t *testing.T) {
	if !localCluster() {
		t.Skip("needs hack/cluster.sh's kube-apiserver")
	}
	scaleUpThrough(t, 30, func() { hack(t, "cluster.sh", "restart-apiserver") })
}

// A user's edits and the autoscaler's patches race on the same RayCluster: the user updates with
// optimistic locking (retrying on conflict) while the autoscaler sends its JSON patches without a
// resourceVersion. Neither write is lost, and the workloads end with both.
func TestConcurrentUserEditAndAutoscalerPatches(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	rc := autoscaledCluster(t, 1, 0)
	as := newAutoscaler(t, rc)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 1; i <= 10; i++ {
			update(t, rc, func(c *rayv1.RayCluster) {
				if c.Spec.WorkerGroupSpecs[0].Template.Labels == nil {
					c.Spec.WorkerGroupSpecs[0].Template.Labels = map[string]string{}
				}
				c.Spec.WorkerGroupSpecs[0].Template.Labels["example.com/edit"] = fmt.Sprint(i)
			})
		}
	}()
	go func() {
		defer wg.Done()
		for _, n := range []int{2, 3, 4, 5, 6} {
			as.patch(t, fmt.Sprintf(`[{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": %d}]`, n))
		}
	}()
	wg.Wait()
	cur := get(g, rc)
	g.Expect(*cur.Spec.WorkerGroupSpecs[0].Replicas).To(Equal(int32(6)), "the autoscaler's last patch must survive the user's edits")
	g.Expect(cur.Spec.WorkerGroupSpecs[0].Template.Labels).To(HaveKeyWithValue("example.com/edit", "10"), "the user's last edit must survive the autoscaler's patches")
	waitReady(t, rc, 6)
	g.Eventually(func(g Gomega) { g.Expect(workerTemplateLabel(g, rc, "example.com/edit")).To(Equal("10")) }, readyTimeout, poll).Should(Succeed())
	created, _ := ledger.counts(t, rc)
	g.Expect(created).To(Equal(1 + 6))
}

// Two operator replicas with leader election: the leader is killed with SIGKILL during a scale-up; the
// other takes over, and no pod is created twice.
func TestLeaderKilledStandbyTakesOver(t *testing.T) {
	if !localCluster() {
		t.Skip("needs operators run by hack/operator.sh")
	}
	g := NewWithT(t)
	hack(t, "operator.sh", "stop")
	t.Cleanup(func() { hack(t, "operator.sh", "start") })
	replica := func(name string, port int) []string {
		return []string{"KRAY_OPERATOR_INSTANCE=" + name, fmt.Sprintf("KRAY_OPERATOR_PROBE_PORT=%d", port),
			"KRAY_OPERATOR_ARGS=--leader-elect --leader-election-namespace=kray-system"}
	}
	a, b := replica("a", 28091), replica("b", 28092)
	hackEnv(t, a, "operator.sh", "start")
	hackEnv(t, b, "operator.sh", "start")
	t.Cleanup(func() { hackEnv(t, a, "operator.sh", "stop"); hackEnv(t, b, "operator.sh", "stop") })

	ns := namespace(t)
	rc := create(t, loadSample(t, "ray-cluster.sample.yaml", ns))
	waitReady(t, rc, 2)
	leader := a
	if !leads(t, "a") {
		leader = b
	}
	g.Expect(leads(t, "a") != leads(t, "b")).To(BeTrue(), "exactly one replica must lead")
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].MaxReplicas = ptr.To[int32](20)
		c.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](12)
	})
	hackEnv(t, leader, "operator.sh", "kill")
	waitReady(t, rc, 12)
	created, deleted := ledger.counts(t, rc)
	g.Expect(created).To(Equal(13))
	g.Expect(deleted).To(BeZero())
}

// leads reports whether the named replica's log says it acquired the leader lease.
func leads(t *testing.T, name string) bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, ".local", "logs", "kray-operator-"+name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	// Only the last start of this replica counts.
	log := string(data)
	if i := strings.LastIndex(log, "==== start"); i >= 0 {
		log = log[i:]
	}
	// client-go's leader election logs it as "successfully acquired lease" (klog) or, since v0.35, "Successfully
	// acquired lease" (structured).
	return strings.Contains(strings.ToLower(log), "successfully acquired lease")
}

// The operator is killed with SIGKILL right after a RayCluster is created and restarted: the cluster
// becomes ready with each pod created once.
func TestOperatorKilledDuringCreate(t *testing.T) {
	if !localCluster() {
		t.Skip("needs the operator run by hack/operator.sh")
	}
	g := NewWithT(t)
	ns := namespace(t)
	t.Cleanup(func() { hack(t, "operator.sh", "start") })
	rc := create(t, loadSample(t, "ray-cluster.sample.yaml", ns))
	hack(t, "operator.sh", "kill")
	hack(t, "operator.sh", "start")
	waitReady(t, rc, 2)
	created, deleted := ledger.counts(t, rc)
	g.Expect(created).To(Equal(3))
	g.Expect(deleted).To(BeZero())
}

// The operator is killed with SIGKILL right after the autoscaler names a pod for deletion and restarted:
// exactly that pod is deleted, once, and nothing is replaced.
func TestOperatorKilledDuringNamedDelete(t *testing.T) {
	if !localCluster() {
		t.Skip("needs the operator run by hack/operator.sh")
	}
	g := NewWithT(t)
	rc := autoscaledCluster(t, 3, 0)
	t.Cleanup(func() { hack(t, "operator.sh", "start") })
	as := newAutoscaler(t, rc)
	victim := workerPods(g, rc, "small-group")[1]
	as.patch(t, fmt.Sprintf(`[{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 2}, {"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": [%s]}}]`, quoted(victim.Name)))
	hack(t, "operator.sh", "kill")
	hack(t, "operator.sh", "start")
	g.Eventually(func(g Gomega) {
		g.Expect(uids(workerPods(g, rc, "small-group"))).NotTo(HaveKey(victim.Name))
	}, readyTimeout, poll).Should(Succeed())
	waitReady(t, rc, 2)
	g.Expect(ledger.deletedNames(t, rc)).To(ConsistOf(victim.Name))
	created, _ := ledger.counts(t, rc)
	g.Expect(created).To(Equal(1 + 3))
}
