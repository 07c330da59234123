package scale

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/kray-project/kray/pkg/constants"
)

func inReplica(name, index string, host string) podOpt {
	return func(p *corev1.Pod) {
		p.Labels = map[string]string{constants.LabelReplicaIndex: index}
		if name != "" {
			p.Labels[constants.LabelReplicaName] = name
			p.Labels[constants.LabelHostIndex] = host
		}
	}
}

func TestReplicaLabelsSingleHost(t *testing.T) {
	pods := []corev1.Pod{pod("w-aaaaa", inReplica("", "0", "")), pod("w-bbbbb", inReplica("", "2", "")), pod("w-ccccc"), pod("w-ddddd"), pod("w-eeeee", phase(corev1.PodFailed))}
	got := ReplicaLabels(pods, csUID, "g", 1)
	want := map[string]map[string]string{
		"w-ccccc": {constants.LabelReplicaIndex: "1"},
		"w-ddddd": {constants.LabelReplicaIndex: "3"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestReplicaLabelsMultiHost(t *testing.T) {
	pods := []corev1.Pod{
		pod("w-aaaaa", inReplica("g-aaaaa", "0", "0")), pod("w-bbbbb", inReplica("g-aaaaa", "0", "1")),
		pod("w-ccccc"), pod("w-ddddd"), pod("w-eeeee"),
	}
	got := ReplicaLabels(pods, csUID, "g", 2)
	want := map[string]map[string]string{
		"w-ccccc": {constants.LabelReplicaIndex: "1", constants.LabelReplicaName: "g-ccccc", constants.LabelHostIndex: "0"},
		"w-ddddd": {constants.LabelReplicaIndex: "1", constants.LabelReplicaName: "g-ccccc", constants.LabelHostIndex: "1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("one whole replica from the two oldest unlabelled pods; the third waits (-want +got):\n%s", diff)
	}
}

func sorted(s []string) []string { s = append([]string(nil), s...); sort.Strings(s); return s }

func TestAtomicReplicas(t *testing.T) {
	two := func() []corev1.Pod {
		return []corev1.Pod{
			pod("a0", inReplica("g-a", "0", "0")), pod("a1", inReplica("g-a", "0", "1")),
			pod("b0", inReplica("g-b", "1", "0")), pod("b1", inReplica("g-b", "1", "1")),
		}
	}
	// A replica that lost a host: its other host is replaced, replicas unchanged.
	lost := two()[:3]
	plan := Compute(Input{CloneSetUID: csUID, CurrentReplicas: 4, DesiredReplicas: 4, Pods: lost, NumOfHosts: 2})
	if diff := cmp.Diff([]string{"b0"}, plan.Replaced); diff != "" || plan.Replicas != 4 {
		t.Fatalf("broken replica: replaced %v (diff %s), replicas %d", plan.Replaced, diff, plan.Replicas)
	}
	// A named host takes its whole replica along.
	plan = Compute(Input{CloneSetUID: csUID, CurrentReplicas: 4, DesiredReplicas: 2, Pods: two(), NumOfHosts: 2, WorkersToDelete: []string{"a1"}, Autoscaling: true})
	if diff := cmp.Diff([]string{"a0", "a1"}, sorted(plan.PodsToDelete)); diff != "" || plan.Replicas != 2 {
		t.Fatalf("named host: podsToDelete %v, replicas %d", plan.PodsToDelete, plan.Replicas)
	}
	// A plain scale-down names the highest-index replica whole.
	plan = Compute(Input{CloneSetUID: csUID, CurrentReplicas: 4, DesiredReplicas: 2, Pods: two(), NumOfHosts: 2})
	if diff := cmp.Diff([]string{"b0", "b1"}, sorted(plan.PodsToDelete)); diff != "" || plan.Replicas != 2 {
		t.Fatalf("scale-down: podsToDelete %v, replicas %d", plan.PodsToDelete, plan.Replicas)
	}
	// With autoscaling, nobody-named pods are never chosen.
	plan = Compute(Input{CloneSetUID: csUID, CurrentReplicas: 4, DesiredReplicas: 2, Pods: two(), NumOfHosts: 2, Autoscaling: true})
	if len(plan.PodsToDelete) != 0 || plan.Replicas != 4 {
		t.Fatalf("autoscaling without names: podsToDelete %v, replicas %d", plan.PodsToDelete, plan.Replicas)
	}
	// Single-host groups are untouched by the replica rules.
	plan = Compute(Input{CloneSetUID: csUID, CurrentReplicas: 3, DesiredReplicas: 3, Pods: lost, NumOfHosts: 1})
	if len(plan.PodsToDelete) != 0 {
		t.Fatalf("single host: podsToDelete %v", plan.PodsToDelete)
	}
}

func TestReplicasNeedWork(t *testing.T) {
	whole := []corev1.Pod{pod("a0", inReplica("g-a", "0", "0")), pod("a1", inReplica("g-a", "0", "1"))}
	if ReplicasNeedWork(whole, csUID, 2, 2) {
		t.Error("a whole replica at the desired size needs no work")
	}
	if !ReplicasNeedWork(whole[:1], csUID, 2, 2) {
		t.Error("a replica that lost a host needs work")
	}
	if !ReplicasNeedWork(whole, csUID, 2, 0) {
		t.Error("more pods than desired needs work")
	}
}
