package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/raycluster"
	"github.com/kray-project/kray/pkg/constants"
)

// rayTaskCounts are the fake Ray head's task counts (`ray tasks summary`).
type rayTaskCounts struct {
	Submitted   int     `json:"submitted"`
	Completed   int     `json:"completed"`
	Killed      int     `json:"killed"`
	Failed      int     `json:"failed"`
	LostSeconds float64 `json:"lostTaskSeconds"`
	Pending     int     `json:"pending"`
	Running     int     `json:"running"`
	// RunningSeconds is how long each running task has run.
	RunningSeconds []float64 `json:"runningTaskSeconds"`
}

// rayTasks runs `ray tasks args...` in the head's Ray container and returns the counts it prints.
func rayTasks(t *testing.T, head *corev1.Pod, args ...string) rayTaskCounts {
	t.Helper()
	out := kubectl(t, append([]string{"exec", "-n", head.Namespace, head.Name, "-c", "ray-head", "--", "ray", "tasks"}, args...)...)
	var c rayTaskCounts
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("ray tasks %v: %v: %s", args, err, out)
	}
	return c
}

// An image change under RollingUpdate with workerDrain, on a worker running a 30 s task: the worker's Ray node
// takes no new task, finishes the one it runs, and only then exits and is updated in place, so the task
// completes and no task-second is lost. The same change without workerDrain restarts the worker at once and
// kills its task, which runs again on the restarted worker.
func TestKindDrainedWorkerFinishesItsTask(t *testing.T) {
	requireKind(t)
	t.Parallel()
	g := NewWithT(t)
	rc := kindRayCluster(kindNamespace(t), "tasks", 1)
	// Tasks run on the worker only, as users keep work off the head; the worker's one CPU is what kray derives
	// from its 500m limit.
	rc.Spec.HeadGroupSpec.RayStartParams["num-cpus"] = "0"
	withUpgrade(rc, rayv1.RayClusterRollingUpdate, 300)
	create(t, rc)
	waitKindReady(t, rc, 1)
	head := headPod(g, rc)
	worker := allWorkers(g, rc)[0]

	rayTasks(t, head, "submit", "--count", "1", "--seconds", "30")
	g.Eventually(func() int { return rayTasks(t, head, "summary").Running }, time.Minute, time.Second).Should(Equal(1))
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = kindUpgradeImage
	})
	g.Eventually(func(g Gomega) {
		g.Expect(rayNodes(t, rc)).To(HaveKeyWithValue(worker.Name, "DRAINING"))
	}, time.Minute, time.Second).Should(Succeed(), "the worker's node drains while its task runs")
	g.Eventually(func(g Gomega) {
		p := allWorkers(g, rc)[0]
		g.Expect(runsImage(&p, kindUpgradeImage)).To(BeTrue(), "pod %s runs the new image", p.Name)
		g.Expect(podReady(&p)).To(BeTrue(), "pod %s ready", p.Name)
	}, kindTimeout, time.Second).Should(Succeed())
	drained := rayTasks(t, head, "summary")
	t.Logf("drained: %+v", drained)
	g.Expect(drained).To(Equal(rayTaskCounts{Submitted: 1, Completed: 1}), "the task ran to its end, nothing lost")
	g.Expect(eventMessages(g, rc, raycluster.EventDrainedWorker)).To(ConsistOf(MatchRegexp(`its Ray node [0-9a-f]+ (is DEAD|has left the cluster)`)))
	p := allWorkers(g, rc)[0]
	g.Expect(p.UID).To(Equal(worker.UID), "updated in place")
	g.Expect(rayContainerStatus(&p).RestartCount).To(Equal(int32(1)), "one restart, the update's")

	// Without workerDrain (the field and its annotation copy gone), the same change kills the running task.
	rayTasks(t, head, "submit", "--count", "1", "--seconds", "30")
	g.Eventually(func() int { return rayTasks(t, head, "summary").Running }, time.Minute, time.Second).Should(Equal(1))
	update(t, rc, func(c *rayv1.RayCluster) {
		c.Spec.WorkerDrain = nil
		delete(c.Annotations, constants.AnnotationWorkerDrain)
		c.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "rayproject/ray:2.46.0"
	})
	g.Eventually(func(g Gomega) {
		g.Expect(rayTasks(t, head, "summary").Killed).To(Equal(1))
	}, kindTimeout, time.Second).Should(Succeed(), "the restart kills the task")
	g.Expect(eventMessages(g, rc, raycluster.EventDrainingWorker)).To(HaveLen(1), "no drain without workerDrain")
	g.Eventually(func(g Gomega) {
		c := rayTasks(t, head, "summary")
		g.Expect(c.Completed).To(Equal(2), "the killed task ran again on the restarted worker: %+v", c)
		g.Expect(c.LostSeconds).To(BeNumerically(">", 0), fmt.Sprintf("%+v", c))
		g.Expect(c.Failed).To(BeZero())
	}, kindTimeout, time.Second).Should(Succeed())
	t.Logf("restarted without a drain: %+v", rayTasks(t, head, "summary"))
}
