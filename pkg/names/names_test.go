package names

import (
	"strings"
	"testing"
)

func TestShorten(t *testing.T) {
	long := strings.Repeat("a", 60)
	tests := []struct {
		name, in string
		max      int
		want     string
	}{
		{name: "fits", in: "ray-head", max: 52, want: "ray-head"},
		{name: "exactly at limit", in: strings.Repeat("b", 52), max: 52, want: strings.Repeat("b", 52)},
		{name: "trailing dash trimmed before hash", in: strings.Repeat("c", 42) + "-" + long, max: 52},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Shorten(tc.in, tc.max)
			if len(got) > tc.max {
				t.Fatalf("Shorten(%q) = %q, %d chars > %d", tc.in, got, len(got), tc.max)
			}
			if tc.want != "" && got != tc.want {
				t.Fatalf("Shorten(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if strings.Contains(got, "--") {
				t.Fatalf("Shorten(%q) = %q contains a double dash", tc.in, got)
			}
			if again := Shorten(tc.in, tc.max); again != got {
				t.Fatalf("not deterministic: %q then %q", got, again)
			}
		})
	}
}

func TestShortenDistinguishesLongNames(t *testing.T) {
	a := WorkerCloneSet(strings.Repeat("x", 53), "group-a")
	b := WorkerCloneSet(strings.Repeat("x", 53), "group-b")
	if a == b {
		t.Fatalf("two groups of one long cluster share the CloneSet name %q", a)
	}
	for _, n := range []string{a, b} {
		if len(n) > MaxWorkloadName {
			t.Fatalf("%q is %d chars, over %d", n, len(n), MaxWorkloadName)
		}
	}
}

func TestWorkloadNames(t *testing.T) {
	if got := HeadStatefulSet("raycluster-kuberay"); got != "raycluster-kuberay-head" {
		t.Fatalf("HeadStatefulSet = %q", got)
	}
	if got := HeadPod("raycluster-kuberay"); got != "raycluster-kuberay-head-0" {
		t.Fatalf("HeadPod = %q", got)
	}
	if got := WorkerCloneSet("raycluster-kuberay", "WorkerGroup"); got != "raycluster-kuberay-workergroup-worker" {
		t.Fatalf("WorkerCloneSet = %q", got)
	}
	if got := HeadService("raycluster-kuberay"); got != "raycluster-kuberay-head-svc" {
		t.Fatalf("HeadService = %q", got)
	}
}
