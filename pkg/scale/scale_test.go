package scale

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appspub "github.com/openkruise/kruise-api/apps/pub"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kray-project/kray/pkg/constants"
)

const csUID = types.UID("cs-uid")

type podOpt func(*corev1.Pod)

func pod(name string, opts ...podOpt) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{UID: csUID, Controller: ptr.To(true), Name: "cs"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func owner(uid types.UID) podOpt {
	return func(p *corev1.Pod) { p.OwnerReferences[0].UID = uid }
}
func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func terminating() podOpt {
	return func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }
}

func TestCompute(t *testing.T) {
	three := []corev1.Pod{pod("a"), pod("b"), pod("c")}
	tests := []struct {
		name        string
		in          Input
		wantReps    int32
		wantList    []string
		wantNamed   []string
		wantIgnored []Ignored
	}{
		{
			name:     "scale up",
			in:       Input{CurrentReplicas: 1, DesiredReplicas: 4},
			wantReps: 4,
		},
		{
			name:     "autoscaler removal: replicas-1 and the named pod, in one write",
			in:       Input{CurrentReplicas: 3, DesiredReplicas: 2, WorkersToDelete: []string{"b"}, Pods: three, Autoscaling: true},
			wantReps: 2, wantList: []string{"b"}, wantNamed: []string{"b"},
		},
		{
			name:     "autoscaling on, decrease without names: nobody named, nobody deleted",
			in:       Input{CurrentReplicas: 3, DesiredReplicas: 1, Pods: three, Autoscaling: true},
			wantReps: 3,
		},
		{
			name:     "autoscaling on, decrease of 2 naming 1: replicas drops by 1 only",
			in:       Input{CurrentReplicas: 3, DesiredReplicas: 1, WorkersToDelete: []string{"a"}, Pods: three, Autoscaling: true},
			wantReps: 2, wantList: []string{"a"}, wantNamed: []string{"a"},
		},
		{
			name:     "autoscaling off, decrease without names: CloneSet picks",
			in:       Input{CurrentReplicas: 3, DesiredReplicas: 1, Pods: three},
			wantReps: 1,
		},
		{
			name:     "names without a decrease: the named pods are replaced",
			in:       Input{CurrentReplicas: 3, DesiredReplicas: 3, WorkersToDelete: []string{"a", "c"}, Pods: three, Autoscaling: true},
			wantReps: 3, wantList: []string{"a", "c"}, wantNamed: []string{"a", "c"},
		},
		{
			name: "gone, terminating, dead and foreign names",
			in: Input{CurrentReplicas: 3, DesiredReplicas: 1, Autoscaling: true,
				WorkersToDelete: []string{"gone", "term", "dead", "other", "a"},
				Pods:            []corev1.Pod{pod("a"), pod("term", terminating()), pod("dead", phase(corev1.PodFailed)), pod("other", owner("other-uid"))}},
			wantReps: 2, wantList: []string{"a"}, wantNamed: []string{"a"},
			wantIgnored: []Ignored{{"dead", IgnoredDead}, {"other", IgnoredOtherOwner}},
		},
		{
			name:     "duplicate names count once",
			in:       Input{CurrentReplicas: 3, DesiredReplicas: 1, WorkersToDelete: []string{"a", "a"}, Pods: three, Autoscaling: true},
			wantReps: 2, wantList: []string{"a"}, wantNamed: []string{"a"},
		},
		{
			name: "a name already listed is not counted again",
			in: Input{CurrentReplicas: 2, CurrentPodsToDelete: []string{"a"}, DesiredReplicas: 2,
				WorkersToDelete: []string{"a"}, Pods: three, Autoscaling: true},
			wantReps: 2, wantList: []string{"a"},
		},
		{
			name:     "listed names that are no longer active are dropped",
			in:       Input{CurrentReplicas: 2, CurrentPodsToDelete: []string{"gone", "term"}, DesiredReplicas: 2, Pods: []corev1.Pod{pod("term", terminating())}},
			wantReps: 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.CloneSetUID = csUID
			got := Compute(tc.in)
			if got.Replicas != tc.wantReps {
				t.Errorf("replicas = %d, want %d", got.Replicas, tc.wantReps)
			}
			if diff := cmp.Diff(tc.wantList, got.PodsToDelete, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("podsToDelete (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantNamed, got.Named, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("named (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantIgnored, got.Ignored, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ignored (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNeverDecreasesBelowDesiredOrByMoreThanNamed(t *testing.T) {
	pods := []corev1.Pod{pod("a"), pod("b"), pod("c"), pod("d")}
	for cur := int32(0); cur <= 4; cur++ {
		for want := int32(0); want <= 6; want++ {
			for n := 0; n <= 4; n++ {
				var names []string
				for _, p := range pods[:n] {
					names = append(names, p.Name)
				}
				got := Compute(Input{CloneSetUID: csUID, CurrentReplicas: cur, DesiredReplicas: want, WorkersToDelete: names, Pods: pods, Autoscaling: true})
				if got.Replicas < want {
					t.Fatalf("cur=%d want=%d named=%d: replicas %d below desired", cur, want, n, got.Replicas)
				}
				if drop := cur - got.Replicas; drop > int32(len(got.Named)) {
					t.Fatalf("cur=%d want=%d named=%d: dropped %d with only %d named", cur, want, n, drop, len(got.Named))
				}
			}
		}
	}
}

func TestHygiene(t *testing.T) {
	never := func(p *corev1.Pod) {
		p.Annotations = map[string]string{constants.AnnotationRestartPolicy: "Never"}
		p.Spec.Containers = []corev1.Container{{Name: "ray"}}
	}
	exited := func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "ray", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}
	}
	restarted := func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "ray", RestartCount: 1, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	}
	// Kruise updated the Ray container's image in place at 12:00:10.
	at := func(sec int) metav1.Time { return metav1.Date(2026, 12, 3, 12, 0, sec, 0, time.UTC) }
	updatedInPlace := func(containers ...string) func(p *corev1.Pod) {
		return func(p *corev1.Pod) {
			last := map[string]appspub.InPlaceUpdateContainerStatus{}
			for _, c := range containers {
				last[c] = appspub.InPlaceUpdateContainerStatus{ImageID: "old"}
			}
			raw, _ := json.Marshal(appspub.InPlaceUpdateState{Revision: "r2", UpdateTimestamp: at(10), LastContainerStatuses: last})
			p.Annotations[appspub.InPlaceUpdateStateKey] = string(raw)
		}
	}
	drainStarted := func(sec int) func(p *corev1.Pod) {
		return func(p *corev1.Pod) { p.Annotations[constants.AnnotationDrainStarted] = at(sec).Format(time.RFC3339) }
	}
	lastRun := func(started, finished int) func(p *corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 143, StartedAt: at(started), FinishedAt: at(finished)}
		}
	}
	pods := []corev1.Pod{
		pod("healthy"),
		pod("never-updated-in-place", never, restarted, updatedInPlace("ray"), lastRun(0, 11)),
		pod("never-updated-in-place-same-second", never, restarted, updatedInPlace("ray"), lastRun(0, 10)),
		pod("never-new-image-exited", never, restarted, updatedInPlace("ray"), lastRun(12, 20)),
		pod("never-exited-before-update", never, restarted, updatedInPlace("ray"), lastRun(0, 5)),
		pod("never-started-as-update-began", never, restarted, updatedInPlace("ray"), lastRun(10, 12)),
		pod("never-other-container-updated", never, restarted, updatedInPlace("sidecar"), lastRun(0, 11)),
		pod("never-no-last-state", never, restarted, updatedInPlace("ray")),
		pod("never-drained", never, restarted, drainStarted(8), lastRun(0, 9)),
		pod("never-drained-skewed-clocks", never, restarted, drainStarted(12), lastRun(0, 9)),
		pod("never-exited-before-drain", never, restarted, drainStarted(40), lastRun(0, 9)),
		pod("failed", phase(corev1.PodFailed)),
		pod("succeeded", phase(corev1.PodSucceeded)),
		pod("failed-terminating", phase(corev1.PodFailed), terminating()),
		pod("failed-other", phase(corev1.PodFailed), owner("x")),
		pod("never-exited", never, exited),
		pod("never-restarted", never, restarted),
		// A pod of another workload that someone labelled and annotated like the cluster's.
		pod("never-exited-other", never, exited, owner("x")),
		pod("always-exited", exited),
	}
	var dead, never2 []string
	for _, p := range DeadPods(pods, csUID) {
		dead = append(dead, p.Name)
	}
	for _, p := range ExitedUnderNever(pods, []types.UID{"head-set", csUID}) {
		never2 = append(never2, p.Name)
	}
	if diff := cmp.Diff([]string{"failed", "succeeded"}, dead); diff != "" {
		t.Errorf("DeadPods (-want +got):\n%s", diff)
	}
	want := []string{"never-new-image-exited", "never-exited-before-update", "never-started-as-update-began",
		"never-other-container-updated", "never-no-last-state", "never-exited-before-drain", "never-exited", "never-restarted"}
	if diff := cmp.Diff(want, never2); diff != "" {
		t.Errorf("ExitedUnderNever (-want +got):\n%s", diff)
	}
}
