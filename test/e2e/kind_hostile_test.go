package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/controller/rayservice"
)

// A head whose Serve API answers a valid 250 MB object, on real kubelets, with the operator in its pod under
// the chart's 512Mi memory limit: the operator is never OOM-killed, reports the answer as too large, and
// another tenant's RayService becomes Ready meanwhile. (Reading such an answer whole took the operator to
// 2,223 MiB out of cluster, TestHostileHeadsHurtNoOtherTenant: here the kernel would kill it, again at each
// restart, for every tenant.)
func TestKindHostileServeAnswerKillsNoOperator(t *testing.T) {
	requireKind(t)
	g := NewWithT(t)
	restarts := map[types.UID]int32{}
	for _, p := range operatorPods(g) {
		restarts[p.UID] = operatorRestarts(p)
	}
	g.Expect(restarts).NotTo(BeEmpty())

	hostile := kubeRayServiceSample(t, "ray-service.sample.yaml", kindNamespace(t))
	fitKindSpec(&hostile.Spec.RayClusterSpec)
	head := &hostile.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers[0]
	head.Env = append(head.Env, corev1.EnvVar{Name: "FAKERAY_SERVE_ANSWER_PADDING", Value: strconv.Itoa(250 << 20)})
	createService(t, hostile)
	victim := kubeRayServiceSample(t, "ray-service.sample.yaml", kindNamespace(t))
	fitKindSpec(&victim.Spec.RayClusterSpec)
	createService(t, victim)

	waitKindServiceReady(t, victim)
	var first time.Time
	g.Eventually(func(g Gomega) {
		g.Expect(eventMessages(g, hostile, rayservice.EventFailedToGetServeApplications)).To(
			ContainElement(ContainSubstring("is larger than 67108864 bytes, the most kray reads")))
		first = time.Now()
	}, 2*kindTimeout, time.Second).Should(Succeed())
	// Several more reads of the answer, one per reconcile of the hostile RayService.
	g.Consistently(func(g Gomega) {
		for _, p := range operatorPods(g) {
			want, known := restarts[p.UID]
			g.Expect(known).To(BeTrue(), "operator pod %s replaced one that was running", p.Name)
			g.Expect(operatorRestarts(p)).To(Equal(want), "operator pod %s restarted: %+v", p.Name, p.Status.ContainerStatuses)
		}
	}, 30*time.Second, time.Second).Should(Succeed())
	ready := serviceCondition(getService(g, hostile), rayv1.RayServiceReady)
	g.Expect(ready == nil || ready.Status != "True").To(BeTrue(), "the hostile RayService is Ready")
	t.Logf("the hostile answer refused first at %s; no operator restart in the 30 s after", first.Format(time.RFC3339))
	expectOperatorNeverForbidden(t)
}

// operatorRestarts is how often the containers of p restarted, -1 once one was OOM-killed.
func operatorRestarts(p corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		if last := cs.LastTerminationState.Terminated; last != nil && strings.Contains(last.Reason, "OOM") {
			return -1
		}
		n += cs.RestartCount
	}
	return n
}
