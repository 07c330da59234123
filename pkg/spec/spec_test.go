package spec

import (
	"math"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
)

func TestGroupReplicas(t *testing.T) {
	cases := []struct {
		name                  string
		replicas, lo, hi      *int32
		hosts                 int32
		groupSuspended, whole bool
		want                  int32
	}{
		{name: "replicas", replicas: ptr.To[int32](3), want: 3},
		{name: "unset means min", lo: ptr.To[int32](2), want: 2},
		{name: "below min", replicas: ptr.To[int32](1), lo: ptr.To[int32](2), want: 2},
		{name: "above max", replicas: ptr.To[int32](9), hi: ptr.To[int32](4), want: 4},
		{name: "hosts multiply", replicas: ptr.To[int32](3), hosts: 4, want: 12},
		{name: "hosts 0 from an old CRD count as 1", replicas: ptr.To[int32](3), hosts: 0, want: 3},
		{name: "saturates", replicas: ptr.To[int32](math.MaxInt32), hosts: 2, want: math.MaxInt32},
		{name: "group suspended", replicas: ptr.To[int32](3), groupSuspended: true, want: 0},
		{name: "cluster suspended", replicas: ptr.To[int32](3), whole: true, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := rayv1.WorkerGroupSpec{Replicas: tc.replicas, MinReplicas: tc.lo, MaxReplicas: tc.hi, NumOfHosts: tc.hosts, Suspend: ptr.To(tc.groupSuspended)}
			rc := &rayv1.RayCluster{Spec: rayv1.RayClusterSpec{Suspend: ptr.To(tc.whole)}}
			if got := GroupReplicas(rc, &g); got != tc.want {
				t.Errorf("GroupReplicas = %d, want %d", got, tc.want)
			}
		})
	}
}

// A suspension that started runs to its end even when spec.suspend is flipped back.
func TestEffectiveSuspend(t *testing.T) {
	suspending := []metav1.Condition{{Type: string(rayv1.RayClusterSuspending), Status: metav1.ConditionTrue}}
	cases := []struct {
		name       string
		suspend    bool
		conditions []metav1.Condition
		want       bool
	}{
		{name: "running", want: false},
		{name: "asked", suspend: true, want: true},
		{name: "flipped back while suspending", conditions: suspending, want: true},
	}
	for _, tc := range cases {
		rc := &rayv1.RayCluster{Spec: rayv1.RayClusterSpec{Suspend: ptr.To(tc.suspend)}, Status: rayv1.RayClusterStatus{Conditions: tc.conditions}}
		if got := EffectiveSuspend(rc); got != tc.want {
			t.Errorf("%s: EffectiveSuspend = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestUpgradeStrategy(t *testing.T) {
	for _, tc := range []struct {
		typ                          *rayv1.RayClusterUpgradeType
		rolling, recreate, updatePod bool
	}{
		{typ: nil},
		{typ: ptr.To(rayv1.RayClusterUpgradeNone)},
		{typ: ptr.To(rayv1.RayClusterRecreate), recreate: true, updatePod: true},
		{typ: ptr.To(rayv1.RayClusterRollingUpdate), rolling: true, updatePod: true},
	} {
		rc := &rayv1.RayCluster{Spec: rayv1.RayClusterSpec{UpgradeStrategy: &rayv1.RayClusterUpgradeStrategy{Type: tc.typ}}}
		if Rolling(rc) != tc.rolling || RecreateOnChange(rc) != tc.recreate || UpdatesPods(rc) != tc.updatePod {
			t.Errorf("%v: Rolling %v RecreateOnChange %v UpdatesPods %v", ptr.Deref(tc.typ, "unset"), Rolling(rc), RecreateOnChange(rc), UpdatesPods(rc))
		}
	}
}
