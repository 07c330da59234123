package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
)

// Each RayCluster has KubeRay's info and provisioned-condition series, owner_kind from its origin label.
func TestRayClusterSeries(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := rayv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	plain := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u1"},
		Status: rayv1.RayClusterStatus{Conditions: []metav1.Condition{{Type: string(rayv1.RayClusterProvisioned), Status: metav1.ConditionTrue, Reason: "AllPodRunningAndReadyFirstTime"}}}}
	ofJob := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "u2",
		Labels: map[string]string{constants.LabelOriginatedFromCRD: constants.OriginatedFromRayJob}}}
	c := clusterCollector{reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(plain, ofJob).Build()}
	want := `
# HELP kuberay_cluster_condition_provisioned Indicates whether the RayCluster is provisioned
# TYPE kuberay_cluster_condition_provisioned gauge
kuberay_cluster_condition_provisioned{condition="false",name="b",namespace="ns",uid="u2"} 1
kuberay_cluster_condition_provisioned{condition="true",name="a",namespace="ns",uid="u1"} 1
# HELP kuberay_cluster_info Metadata information about RayCluster custom resources
# TYPE kuberay_cluster_info gauge
kuberay_cluster_info{name="a",namespace="ns",owner_kind="None",uid="u1"} 1
kuberay_cluster_info{name="b",namespace="ns",owner_kind="RayJob",uid="u2"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// The provisioning time is recorded once, on the status write that makes the cluster provisioned, and
// dropped with the cluster.
func TestProvisionedDuration(t *testing.T) {
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u3", CreationTimestamp: metav1.NewTime(created)}}
	provisioned := rayv1.RayClusterStatus{Conditions: []metav1.Condition{{Type: string(rayv1.RayClusterProvisioned), Status: metav1.ConditionTrue}}}
	ObserveProvisioned(rc, rayv1.RayClusterStatus{}, rayv1.RayClusterStatus{}, created.Add(time.Second))
	if n := testutil.CollectAndCount(kubeRayProvisionedDuration); n != 0 {
		t.Fatalf("%d series before provisioning, want 0", n)
	}
	ObserveProvisioned(rc, rayv1.RayClusterStatus{}, provisioned, created.Add(42*time.Second))
	ObserveProvisioned(rc, provisioned, provisioned, created.Add(99*time.Second)) // no transition: unchanged
	if got := testutil.ToFloat64(kubeRayProvisionedDuration.WithLabelValues("p", "ns", "u3")); got != 42 {
		t.Errorf("provisioned duration %v, want 42", got)
	}
	Forget("ns", "p")
	if n := testutil.CollectAndCount(kubeRayProvisionedDuration); n != 0 {
		t.Errorf("%d series after the cluster went, want 0", n)
	}
}
