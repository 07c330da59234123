package features

import (
	"strings"
	"testing"
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
