package integration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisev1beta1 "github.com/openkruise/kruise-api/apps/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/internal/fixture"
	"github.com/kray-project/kray/pkg/names"
)

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
)

var nsCounter atomic.Int32

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("it-%d-%s", nsCounter.Add(1), strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")))
	if len(name) > 63 {
		name = name[:63]
	}
	name = strings.TrimRight(name, "-")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return name
}

// clusterBuilder is a fluent RayCluster fixture.
type clusterBuilder struct{ rc *rayv1.RayCluster }

func newCluster(ns, name string) *clusterBuilder {
	return &clusterBuilder{rc: fixture.Cluster(ns, name)}
}

func (b *clusterBuilder) group(name string, replicas, lo, hi int32) *clusterBuilder {
	b.rc.Spec.WorkerGroupSpecs = append(b.rc.Spec.WorkerGroupSpecs, fixture.Group(name, replicas, lo, hi))
	return b
}

func (b *clusterBuilder) create(t *testing.T) *rayv1.RayCluster {
	t.Helper()
	if err := k8s.Create(context.Background(), b.rc); err != nil {
		t.Fatalf("create RayCluster: %v", err)
	}
	return b.rc
}

func key(obj client.Object) client.ObjectKey { return client.ObjectKeyFromObject(obj) }

func getCluster(g Gomega, rc *rayv1.RayCluster) *rayv1.RayCluster {
	out := &rayv1.RayCluster{}
	g.Expect(k8s.Get(context.Background(), key(rc), out)).To(Succeed())
	return out
}

func cloneSet(g Gomega, rc *rayv1.RayCluster, group string) *kruisev1alpha1.CloneSet {
	cs := &kruisev1alpha1.CloneSet{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: rc.Namespace, Name: names.WorkerCloneSet(rc.Name, group)}, cs)).To(Succeed())
	return cs
}

func headSet(g Gomega, rc *rayv1.RayCluster) *kruisev1beta1.StatefulSet {
	sts := &kruisev1beta1.StatefulSet{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: rc.Namespace, Name: names.HeadStatefulSet(rc.Name)}, sts)).To(Succeed())
	return sts
}

// updateCluster applies mutate to the latest RayCluster and updates it, retrying on conflict.
func updateCluster(t *testing.T, rc *rayv1.RayCluster, mutate func(*rayv1.RayCluster)) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		cur := getCluster(g, rc)
		mutate(cur)
		g.Expect(k8s.Update(context.Background(), cur)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

func condition(rc *rayv1.RayCluster, t string) *metav1.Condition {
	return meta.FindStatusCondition(rc.Status.Conditions, t)
}
