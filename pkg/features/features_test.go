package features

import (
	"strings"
	"testing"

	"k8s.io/component-base/featuregate"
)

func TestFlag(t *testing.T) {
	tests := []struct {
		in      string
		want    bool
		wantErr string
	}{
		{in: "", want: true},
		{in: "WorkerPodEventBatching=false", want: false},
		{in: " WorkerPodEventBatching = true ", want: true},
		{in: "NoSuchGate=true", wantErr: "unrecognized feature gate"},
		{in: "WorkerPodEventBatching", wantErr: "want Name=true"},
		{in: "WorkerPodEventBatching=maybe", wantErr: "is not a boolean"},
	}
	for _, tc := range tests {
		g := New()
		err := Flag{g}.Set(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Set(%q) = %v, want an error containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Set(%q): %v", tc.in, err)
		}
		if got := g.Enabled(WorkerPodEventBatching); got != tc.want {
			t.Errorf("Set(%q): WorkerPodEventBatching = %t, want %t", tc.in, got, tc.want)
		}
	}
}

// KubeRay v1.7's chart passes these gates by default; kray starts with them, with KubeRay's defaults for the
// gates it has (RayMultiHostIndexing excepted, see its comment), and warns about the features it lacks.
func TestKubeRayGates(t *testing.T) {
	g := New()
	for gate, want := range map[string]bool{
		"RayClusterStatusConditions": true, "RayJobDeletionPolicy": true, "RayMultiHostIndexing": false,
		"RayServiceIncrementalUpgrade": true, "RayCronJob": false, "RayClusterMTLS": false,
		"RayClusterNetworkPolicy": false, "RayClusterHistoryServer": false, "SidecarSubmitterRestart": false,
		"GCSFaultToleranceEmbeddedStorage": false, "KubernetesWAS": false,
	} {
		if got := g.Enabled(featuregate.Feature(gate)); got != want {
			t.Errorf("default of %s = %t, want %t", gate, got, want)
		}
	}
	chart := "RayClusterStatusConditions=true,RayJobDeletionPolicy=true,RayMultiHostIndexing=true,RayServiceIncrementalUpgrade=true," +
		"RayCronJob=false,RayClusterMTLS=false,RayClusterNetworkPolicy=false,RayClusterHistoryServer=false"
	if err := (Flag{g}).Set(chart); err != nil {
		t.Fatalf("KubeRay v1.7 chart's gates: %v", err)
	}
	if got := Warnings(g); len(got) != 0 {
		t.Errorf("warnings %q, want none", got)
	}
	if err := (Flag{g}).Set("RayServiceIncrementalUpgrade=false,RayClusterStatusConditions=false,RayCronJob=true,KubernetesWAS=true"); err != nil {
		t.Fatal(err)
	}
	got := Warnings(g)
	if len(got) != 2 || !strings.Contains(got[0], "KubernetesWAS is on") || !strings.Contains(got[1], "RayClusterStatusConditions is off, but kray always writes") {
		t.Errorf("warnings %q, want KubernetesWAS on and RayClusterStatusConditions off (RayCronJob is implemented)", got)
	}
	if !NotImplemented(KubernetesWAS) || NotImplemented(RayClusterMTLS) || NotImplemented(RayCronJob) || NotImplemented(RayJobDeletionPolicy) {
		t.Error("NotImplemented: KubernetesWAS should be, RayClusterMTLS, RayCronJob and RayJobDeletionPolicy should not")
	}
}
