package status

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
	"github.com/kray-project/kray/pkg/constants"
	"github.com/kray-project/kray/pkg/spec"
)

var now = metav1.NewTime(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))

func cluster() *rayv1.RayCluster {
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")}}
	return &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "rc", Namespace: "ns", Generation: 3},
		Spec: rayv1.RayClusterSpec{
			HeadGroupSpec: rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "h", Resources: res}}}}},
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{
				GroupName: "g", Replicas: ptr.To[int32](2), MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](5), NumOfHosts: 1,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "w", Resources: res}}}},
			}},
		},
	}
}

func rayPod(name, nodeType string, ready bool) corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{constants.LabelNodeType: nodeType}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

func allReady() []corev1.Pod {
	return []corev1.Pod{rayPod("rc-head-0", "head", true), rayPod("w1", "worker", true), rayPod("w2", "worker", true)}
}

func cond(st rayv1.RayClusterStatus, t rayv1.RayClusterConditionType) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, string(t))
}

func TestReady(t *testing.T) {
	rc := cluster()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "rc-head-svc"}, Spec: corev1.ServiceSpec{ClusterIP: "None",
		Ports: []corev1.ServicePort{{Name: "dashboard", Port: 8265}, {Name: "gcs-server", Port: 6379}}}}
	st := Compute(rc, Observed{Pods: allReady(), HeadService: svc, Now: now})
	if st.State != rayv1.Ready {
		t.Fatalf("state = %q, want ready", st.State)
	}
	if st.DesiredWorkerReplicas != 2 || st.ReadyWorkerReplicas != 2 || st.AvailableWorkerReplicas != 2 || st.MaxWorkerReplicas != 5 {
		t.Fatalf("replica counts = %+v", st)
	}
	if st.DesiredCPU.String() != "3" || st.DesiredMemory.String() != "6Gi" {
		t.Fatalf("desired resources = %s cpu, %s memory", st.DesiredCPU.String(), st.DesiredMemory.String())
	}
	if st.Head.ServiceIP != "10.0.0.1" || st.Head.PodName != "rc-head-0" || st.Endpoints["dashboard"] != "8265" {
		t.Fatalf("head/endpoints = %+v %v", st.Head, st.Endpoints)
	}
	if c := cond(st, rayv1.HeadPodReady); c.Status != metav1.ConditionTrue || c.Reason != constants.ReasonHeadPodRunningAndReady {
		t.Fatalf("HeadPodReady = %+v", c)
	}
	if c := cond(st, rayv1.RayClusterProvisioned); c.Status != metav1.ConditionTrue {
		t.Fatalf("Provisioned = %+v", c)
	}
	if st.StateTransitionTimes[rayv1.Ready] == nil || st.ObservedGeneration != 3 {
		t.Fatalf("transition times/generation not set: %+v", st)
	}
	// Once ready, the state stays ready after a pod fails (KubeRay's deprecated state never resets),
	// while HeadPodReady follows the pod.
	rc.Status = st
	pods := allReady()
	pods[0].Status.Conditions[0].Status = corev1.ConditionFalse
	pods[0].Status.Conditions[0].Reason = "Evicted"
	st2 := Compute(rc, Observed{Pods: pods, HeadService: svc, Now: now})
	if st2.State != rayv1.Ready || cond(st2, rayv1.HeadPodReady).Status != metav1.ConditionFalse || cond(st2, rayv1.HeadPodReady).Reason != "Evicted" {
		t.Fatalf("after head failure: state %q, HeadPodReady %+v", st2.State, cond(st2, rayv1.HeadPodReady))
	}
}

func TestNotReady(t *testing.T) {
	for name, obs := range map[string]Observed{
		"missing worker":  {Pods: allReady()[:2]},
		"only the head":   {Pods: allReady()[:1]},
		"worker unready":  {Pods: []corev1.Pod{rayPod("h", "head", true), rayPod("w1", "worker", true), rayPod("w2", "worker", false)}},
		"reconcile error": {Pods: allReady(), SyncError: errors.New("webhook down")},
	} {
		obs.Now = now
		st := Compute(cluster(), obs)
		if st.State == rayv1.Ready {
			t.Errorf("%s: state ready", name)
		}
		if c := cond(st, rayv1.RayClusterProvisioned); obs.SyncError == nil && c.Status != metav1.ConditionFalse {
			t.Errorf("%s: Provisioned = %+v", name, c)
		}
	}
}

func TestSuspendLifecycle(t *testing.T) {
	rc := cluster()
	rc.Spec.Suspend = ptr.To(true)
	st := Compute(rc, Observed{Pods: allReady(), Now: now})
	if !meta.IsStatusConditionTrue(st.Conditions, string(rayv1.RayClusterSuspending)) || st.State == rayv1.Suspended {
		t.Fatalf("pods remain: want Suspending, got %+v", st.Conditions)
	}
	rc.Status = st
	if !spec.EffectiveSuspend(rc) {
		t.Fatal("suspension in progress must stay effective")
	}
	rc.Spec.Suspend = ptr.To(false) // flipped back mid-way: the suspension still completes
	st = Compute(rc, Observed{Now: now})
	if !meta.IsStatusConditionTrue(st.Conditions, string(rayv1.RayClusterSuspended)) || st.State != rayv1.Suspended {
		t.Fatalf("no pods left: want Suspended, got %q %+v", st.State, st.Conditions)
	}
	if c := cond(st, rayv1.RayClusterProvisioned); c.Status != metav1.ConditionFalse || c.Message != "RayCluster has been suspended" {
		t.Fatalf("Provisioned after suspension = %+v", c)
	}
	rc.Status = st
	st = Compute(rc, Observed{Now: now})
	if meta.IsStatusConditionTrue(st.Conditions, string(rayv1.RayClusterSuspended)) {
		t.Fatalf("resumed: Suspended should be False, got %+v", st.Conditions)
	}
}

func TestReplicaFailure(t *testing.T) {
	rc := cluster()
	sets := []kruisev1alpha1.CloneSet{{ObjectMeta: metav1.ObjectMeta{Name: "cs"}, Status: kruisev1alpha1.CloneSetStatus{Conditions: []kruisev1alpha1.CloneSetCondition{{
		Type: kruisev1alpha1.CloneSetConditionFailedScale, Status: corev1.ConditionTrue, Message: `pods "x" is forbidden: exceeded quota`}}}}}
	st := Compute(rc, Observed{Pods: allReady()[:1], CloneSets: sets, Now: now})
	c := cond(st, rayv1.RayClusterReplicaFailure)
	if c == nil || c.Reason != constants.ReasonFailedCreateWorkerPod || c.Status != metav1.ConditionTrue {
		t.Fatalf("ReplicaFailure = %+v", c)
	}
	rc.Status = st
	st = Compute(rc, Observed{Pods: allReady(), Now: now})
	if cond(st, rayv1.RayClusterReplicaFailure) != nil {
		t.Fatal("ReplicaFailure must be removed once the workloads create pods again")
	}
}

// Kruise v1.9 leaves FailedScale on a CloneSet after the refusal ends: only a CloneSet short of pods (or whose
// status is of an older spec) is a replica failure.
func TestReplicaFailureFollowsTheShortfall(t *testing.T) {
	failed := []kruisev1alpha1.CloneSetCondition{{Type: kruisev1alpha1.CloneSetConditionFailedScale, Status: corev1.ConditionTrue, Message: "exceeded quota"}}
	for _, tt := range []struct {
		name                 string
		generation, observed int64
		want, have           int32
		failure              bool
	}{
		{"short of pods", 2, 2, 3, 2, true},
		{"recovered, condition left behind", 2, 2, 3, 3, false},
		{"status of an older spec", 3, 2, 3, 3, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sets := []kruisev1alpha1.CloneSet{{
				ObjectMeta: metav1.ObjectMeta{Name: "cs", Generation: tt.generation},
				Spec:       kruisev1alpha1.CloneSetSpec{Replicas: ptr.To(tt.want)},
				Status:     kruisev1alpha1.CloneSetStatus{ObservedGeneration: tt.observed, Replicas: tt.have, Conditions: failed},
			}}
			st := Compute(cluster(), Observed{Pods: allReady(), CloneSets: sets, Now: now})
			if got := cond(st, rayv1.RayClusterReplicaFailure) != nil; got != tt.failure {
				t.Errorf("ReplicaFailure reported = %t, want %t", got, tt.failure)
			}
		})
	}
}

func TestNeedsWrite(t *testing.T) {
	rc := cluster()
	st := Compute(rc, Observed{Pods: allReady(), Now: now})
	rc.Status = st
	later := metav1.NewTime(now.Add(time.Minute))
	if NeedsWrite(st, Compute(rc, Observed{Pods: allReady(), Now: later})) {
		t.Fatal("an unchanged status must not be written again")
	}
}

// The status kray reads back from the API server has been through JSON: its quantities carry their
// string form and its times the local zone. An unchanged status is still not written again.
func TestNeedsWriteAfterARoundTrip(t *testing.T) {
	rc := cluster()
	st := Compute(rc, Observed{Pods: allReady(), Now: now})
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var stored rayv1.RayClusterStatus
	if err := json.Unmarshal(data, &stored); err != nil {
		t.Fatal(err)
	}
	rc.Status = stored
	if NeedsWrite(stored, Compute(rc, Observed{Pods: allReady(), Now: now})) {
		t.Fatal("a status read back from the API server must not be written again unchanged")
	}
	changed := stored.DeepCopy()
	changed.DesiredCPU.Add(resource.MustParse("1"))
	if !NeedsWrite(stored, *changed) {
		t.Fatal("a changed quantity must be written")
	}
}

func TestProgressOnly(t *testing.T) {
	rc := cluster()
	base := Compute(rc, Observed{Pods: allReady(), Now: now})
	later := metav1.NewTime(now.Add(time.Minute))
	cases := map[string]struct {
		mutate func(*rayv1.RayClusterStatus)
		want   bool
	}{
		"the same status":         {func(*rayv1.RayClusterStatus) {}, true},
		"only lastUpdateTime":     {func(st *rayv1.RayClusterStatus) { st.LastUpdateTime = &later }, true},
		"a worker more ready":     {func(st *rayv1.RayClusterStatus) { st.ReadyWorkerReplicas++; st.LastUpdateTime = &later }, true},
		"a worker less available": {func(st *rayv1.RayClusterStatus) { st.AvailableWorkerReplicas--; st.ReadyWorkerReplicas-- }, true},
		"a group's updated pods": {func(st *rayv1.RayClusterStatus) {
			st.UpdateProgress = []rayv1.GroupUpdateProgress{{GroupName: "g", Replicas: 2, UpdatedReplicas: 1}}
		}, true},
		"the state":               {func(st *rayv1.RayClusterStatus) { st.State = rayv1.Suspended; st.ReadyWorkerReplicas++ }, false},
		"a condition":             {func(st *rayv1.RayClusterStatus) { st.Conditions[0].Status = "Unknown" }, false},
		"the desired workers":     {func(st *rayv1.RayClusterStatus) { st.DesiredWorkerReplicas++ }, false},
		"the observed generation": {func(st *rayv1.RayClusterStatus) { st.ObservedGeneration++ }, false},
		"the head's address":      {func(st *rayv1.RayClusterStatus) { st.Head = rayv1.HeadInfo{PodIP: "10.0.0.9"} }, true},
		"a condition's message": {func(st *rayv1.RayClusterStatus) {
			st.Conditions[0].Reason, st.Conditions[0].Message = "Other", "another message"
		}, true},
		"a condition's status and message": {func(st *rayv1.RayClusterStatus) {
			st.Conditions[0].Status, st.Conditions[0].Message = "Unknown", "another message"
		}, false},
		"a new condition": {func(st *rayv1.RayClusterStatus) {
			st.Conditions = append(st.Conditions, metav1.Condition{Type: "New", Status: "True"})
		}, false},
		"the endpoints":              {func(st *rayv1.RayClusterStatus) { st.Endpoints = map[string]string{"dashboard": "8266"} }, false},
		"the reason with the counts": {func(st *rayv1.RayClusterStatus) { st.Reason = "x"; st.ReadyWorkerReplicas-- }, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			updated := *base.DeepCopy()
			tc.mutate(&updated)
			if got := ProgressOnly(base, updated); got != tc.want {
				t.Errorf("ProgressOnly = %v, want %v", got, tc.want)
			}
		})
	}
}

// A new cluster's head coming up is progress; the head going down, a replaced head coming up, and the state
// that follows the head, are not.
func TestProgressOnlyHeadReady(t *testing.T) {
	rc := cluster()
	pods := allReady()[:1]
	up := Compute(rc, Observed{Pods: pods, Now: now})
	pods[0].Status.Conditions[0].Status = corev1.ConditionFalse
	down := Compute(rc, Observed{Pods: pods, Now: now})
	if c := cond(up, rayv1.RayClusterProvisioned); c.Status != metav1.ConditionFalse {
		t.Fatalf("a cluster with its head alone: Provisioned %+v", c)
	}
	if !ProgressOnly(down, up) {
		t.Error("a new cluster's head becoming Ready is not progress")
	}
	if ProgressOnly(up, down) {
		t.Error("the head going down is progress")
	}

	provisioned := Compute(rc, Observed{Pods: allReady(), Now: now})
	replaced := *provisioned.DeepCopy()
	meta.SetStatusCondition(&replaced.Conditions, metav1.Condition{Type: string(rayv1.HeadPodReady), Status: metav1.ConditionFalse, Reason: "ContainersNotReady"})
	if ProgressOnly(replaced, provisioned) {
		t.Error("a replaced head becoming Ready is progress")
	}
	downAndNotReady := *down.DeepCopy()
	downAndNotReady.State = rayv1.Suspended
	if ProgressOnly(downAndNotReady, up) {
		t.Error("the state following the head is progress")
	}
}
