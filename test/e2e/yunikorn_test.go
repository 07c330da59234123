package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kray-project/kray/pkg/batchscheduler"
)

// placeholders are the pods YuniKorn made in ns to hold a gang's room (named tg-...), bound or not.
func placeholders(g Gomega, ns string) (all, bound int) {
	pods := &corev1.PodList{}
	g.Expect(k8s.List(context.Background(), pods, client.InNamespace(ns))).To(Succeed())
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, "tg-") && p.DeletionTimestamp == nil {
			all++
			if p.Spec.NodeName != "" {
				bound++
			}
		}
	}
	return all, bound
}

// With the real YuniKorn scheduler: a gang of three pods (its task groups on every pod) on a node with room
// for two is held behind YuniKorn's placeholders, none of its pods bound, while an un-ganged cluster beside it
// gets two of three bound; once a third slot comes the placeholders are all placed and the real pods take
// their places.
func TestYuniKornGangBehindPlaceholders(t *testing.T) {
	needStarted(t, "KRAY_E2E_YUNIKORN", "the YuniKorn scheduler")
	g := NewWithT(t)
	ns := namespace(t)
	batchOperator(t, batchscheduler.YuniKorn, "")
	gangNodeName, singleNodeName := ns+"-gang", ns+"-single"
	gangNode(t, gangNodeName, 2)
	gangNode(t, singleNodeName, 2)

	gang := onGangNode(t, ns, gangNodeName, true)
	gang.Labels[batchscheduler.LabelYuniKornAppID] = ns + "-gang"
	// YuniKorn gangs a group's minReplicas: all of the cluster's pods here.
	gang.Spec.WorkerGroupSpecs[0].MinReplicas = ptr.To[int32](2)
	rc := create(t, gang)
	single := onGangNode(t, ns, singleNodeName, false)
	single.Name = "single"
	single.Labels = map[string]string{batchscheduler.LabelYuniKornAppID: ns + "-single"}
	create(t, single)

	g.Eventually(func(g Gomega) {
		g.Expect(clusterPods(g, rc)).To(HaveLen(3))
		all, placed := placeholders(g, ns)
		g.Expect(all).To(Equal(3), "a placeholder for each member of the gang")
		g.Expect(placed).To(Equal(2), "room for two")
		g.Expect(bound(g, single)).To(Equal(2), "the un-ganged cluster's pods bind one by one")
	}, readyTimeout, poll).Should(Succeed())
	for _, p := range clusterPods(g, rc) {
		g.Expect(p.Spec.SchedulerName).To(Equal(batchscheduler.YuniKornName))
		g.Expect(p.Labels).To(HaveKeyWithValue(batchscheduler.LabelPodApplicationID, ns+"-gang"))
		g.Expect(p.Annotations).To(HaveKey(batchscheduler.AnnotationTaskGroups))
		g.Expect(p.Annotations).To(HaveKeyWithValue(batchscheduler.AnnotationTaskGroupName, p.Labels["ray.io/group"]))
	}
	g.Consistently(func(g Gomega) { g.Expect(bound(g, rc)).To(BeZero()) }, 10*time.Second, time.Second).Should(Succeed(), "two of three fit, and none may start")

	setSlots(t, gangNodeName, 3)
	waitReady(t, rc, 2)
	g.Eventually(func(g Gomega) {
		all, _ := placeholders(g, ns)
		g.Expect(all).To(BeZero(), "every placeholder replaced by its real pod")
	}, readyTimeout, poll).Should(Succeed())
	g.Expect(bound(g, rc)).To(Equal(3))
}
