package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/names"
)

// Workloads written by an older kray, whose spec hash was computed differently, get the current hash in one
// update that restarts no pod, even under upgradeStrategy Recreate, which recreates every pod on a template
// change: the template kray writes is the one already there, so Kruise's revision stays.
func TestWorkloadsOfAnOlderKrayRestartNothing(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	rc := create(t, sampleWithStrategy(t, ns, rayv1.RayClusterRecreate))
	waitReady(t, rc, 2)
	before := uids(clusterPods(g, rc))
	head := client.ObjectKey{Namespace: ns, Name: names.HeadStatefulSet(rc.Name)}
	group := client.ObjectKey{Namespace: ns, Name: names.WorkerCloneSet(rc.Name, rc.Spec.WorkerGroupSpecs[0].GroupName)}
	sts, cs := &kruisev1beta1.StatefulSet{}, &kruisev1alpha1.CloneSet{}
	g.Expect(k8s.Get(context.Background(), head, sts)).To(Succeed())
	g.Expect(k8s.Get(context.Background(), group, cs)).To(Succeed())
	hashes := map[string]string{"sts": sts.Annotations[constants.AnnotationSpecHash], "cs": cs.Annotations[constants.AnnotationSpecHash]}
	revisions := map[string]string{"sts": sts.Status.UpdateRevision, "cs": cs.Status.UpdateRevision}
	g.Expect(hashes).NotTo(ContainElement(""))

	older := []byte(`{"metadata":{"annotations":{"` + constants.AnnotationSpecHash + `":"0123456789abcdef"}}}`)
	g.Expect(k8s.Patch(context.Background(), sts, client.RawPatch(client.Merge.Type(), older))).To(Succeed())
	g.Expect(k8s.Patch(context.Background(), cs, client.RawPatch(client.Merge.Type(), older))).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), head, sts)).To(Succeed())
		g.Expect(k8s.Get(context.Background(), group, cs)).To(Succeed())
		g.Expect(sts.Annotations[constants.AnnotationSpecHash]).To(Equal(hashes["sts"]))
		g.Expect(cs.Annotations[constants.AnnotationSpecHash]).To(Equal(hashes["cs"]))
	}, readyTimeout, poll).Should(Succeed(), "kray did not write its spec hash back")
	g.Consistently(func(g Gomega) {
		g.Expect(uids(clusterPods(g, rc))).To(Equal(before))
		g.Expect(k8s.Get(context.Background(), head, sts)).To(Succeed())
		g.Expect(k8s.Get(context.Background(), group, cs)).To(Succeed())
		g.Expect(map[string]string{"sts": sts.Status.UpdateRevision, "cs": cs.Status.UpdateRevision}).To(Equal(revisions))
	}, 5*time.Second, poll).Should(Succeed())
}
