package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// Each RayService has KubeRay's three series, the conditions as "true" or "false".
func TestRayServiceSeries(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := rayv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	svc := &rayv1.RayService{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns", UID: "u1"},
		Status: rayv1.RayServiceStatuses{Conditions: []metav1.Condition{
			{Type: string(rayv1.RayServiceReady), Status: metav1.ConditionTrue, Reason: "NonZeroServeEndpoints"},
			{Type: string(rayv1.UpgradeInProgress), Status: metav1.ConditionFalse, Reason: "NoPendingCluster"},
		}}}
	c := serviceCollector{reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(svc).Build()}
	want := `
# HELP kuberay_service_condition_ready Describes whether the RayService is ready. Ready means users can send requests to the underlying cluster and the number of serve endpoints is greater than 0.
# TYPE kuberay_service_condition_ready gauge
kuberay_service_condition_ready{condition="true",name="svc",namespace="ns",uid="u1"} 1
# HELP kuberay_service_condition_upgrade_in_progress Describes whether the RayService is performing a zero-downtime upgrade.
# TYPE kuberay_service_condition_upgrade_in_progress gauge
kuberay_service_condition_upgrade_in_progress{condition="false",name="svc",namespace="ns",uid="u1"} 1
# HELP kuberay_service_info Metadata information about RayService custom resources
# TYPE kuberay_service_info gauge
kuberay_service_info{name="svc",namespace="ns",uid="u1"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
