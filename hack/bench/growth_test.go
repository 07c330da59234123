package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseGrowth(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr string
	}{
		{in: "", want: nil},
		{in: "100", want: []int{100}},
		{in: "100,300,1000", want: []int{100, 300, 1000}},
		{in: " 100, 300 ,1000 ", want: []int{100, 300, 1000}},
		{in: "100,x", wantErr: `"x" is not a cluster count`},
		{in: "100,,300", wantErr: `"" is not a cluster count`},
		{in: "0,100", wantErr: "want at least 1"},
		{in: "-5", wantErr: "want at least 1"},
		{in: "300,100", wantErr: "100 after 300: want increasing counts"},
		{in: "100,100", wantErr: "100 after 100: want increasing counts"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseGrowth(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseGrowth(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseGrowth(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestPointConfig(t *testing.T) {
	cfg := config{Clusters: 100, Scenarios: []string{"scale", "evict"}, CreateRate: 7, KruiseProfile: "defaults"}
	got := pointConfig(cfg, 1000)
	if got.Clusters != 1000 || !cmp.Equal(got.Scenarios, []string{scenarioCreate}) {
		t.Errorf("point config has %d clusters and scenarios %v, want 1000 and [create]", got.Clusters, got.Scenarios)
	}
	if got.CreateRate != 7 || got.KruiseProfile != "defaults" {
		t.Errorf("point config lost the rate or the Kruise profile: %+v", got)
	}
	if cfg.Clusters != 100 || !cmp.Equal(cfg.Scenarios, []string{"scale", "evict"}) {
		t.Errorf("pointConfig modified its input: %+v", cfg)
	}
}

// A failed point is recorded and the run goes on; the first error is returned, naming operator and count.
func TestGrowKeepsGoingAfterAnError(t *testing.T) {
	res := &growthResults{Config: config{Growth: []int{100, 300, 1000}}}
	ops := []*operator{{name: operatorKray}, {name: operatorKubeRay}}
	var calls []string
	fake := func(_ context.Context, cfg config, op *operator) (operatorResult, error) {
		calls = append(calls, fmt.Sprintf("%s/%d/%v", op.name, cfg.Clusters, cfg.Scenarios))
		if cfg.Clusters == 300 {
			return operatorResult{Name: op.name}, fmt.Errorf("boom %s", op.name)
		}
		return createRun(op.name, cfg.Clusters, createFigures{allReady: 1}), nil
	}
	err := res.grow(context.Background(), ops, fake)
	if err == nil || err.Error() != "kray at 300 clusters: boom kray" {
		t.Errorf("grow error = %v, want kray's at 300 clusters", err)
	}
	wantCalls := []string{"kray/100/[create]", "kray/300/[create]", "kray/1000/[create]",
		"kuberay/100/[create]", "kuberay/300/[create]", "kuberay/1000/[create]"}
	if diff := cmp.Diff(wantCalls, calls); diff != "" {
		t.Errorf("measurements (-want +got):\n%s", diff)
	}
	for _, p := range res.Points {
		var names []string
		for _, op := range p.Operators {
			names = append(names, op.Name)
		}
		if !cmp.Equal(names, []string{operatorKray, operatorKubeRay}) {
			t.Errorf("point %d holds %v, want kray then kuberay", p.Clusters, names)
		}
	}
}

func TestGrowStopsWhenCancelled(t *testing.T) {
	res := &growthResults{Config: config{Growth: []int{100, 300}}}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	fake := func(context.Context, config, *operator) (operatorResult, error) {
		n++
		cancel()
		return operatorResult{}, nil
	}
	err := res.grow(ctx, []*operator{{name: operatorKray}, {name: operatorKubeRay}}, fake)
	if n != 1 || !errors.Is(err, context.Canceled) {
		t.Errorf("after a cancel: %d measurements and error %v, want 1 and context.Canceled", n, err)
	}
}

// createFigures are the numbers of one synthetic create scenario.
type createFigures struct {
	allReady, p50, p99, cpu, kruiseCPU, rss, requests, reconciles float64
	err                                                           string
}

// createRun is an operator result holding one create scenario of n clusters with the figures f.
func createRun(name string, n int, f createFigures) operatorResult {
	return operatorResult{Name: name, Cluster: clusterInfo{Env: map[string]string{"KRAY_NODES": fmt.Sprint(4 + n/1000), "KRAY_NODE_PODS": "1000"}},
		Scenarios: []scenarioResult{{
			Name: scenarioCreate,
			Figures: []figure{
				{Key: figureAllReady, Unit: "s", Value: f.allReady},
				{Key: figureP50, Unit: "s", Value: f.p50},
				{Key: figureP99, Unit: "s", Value: f.p99},
			},
			Operator: procSample{CPUSeconds: f.cpu, PeakRSSMiB: f.rss, Requests: map[string]float64{"GET": f.requests / 2, "PUT": f.requests / 2},
				Reconciles: f.reconciles},
			Kruise: procSample{CPUSeconds: f.kruiseCPU},
			Error:  f.err,
		}}}
}

// syntheticGrowth is a growth run at 100 and 1,000 clusters in which KubeRay never got to its second point.
func syntheticGrowth() *growthResults {
	return &growthResults{
		Config:  config{Operators: []string{operatorKray, operatorKubeRay}, Growth: []int{100, 1000}, CreateRate: 10, KruiseProfile: "recommended"},
		Machine: machine{NProc: 2, CPU: "Xeon", KrayVersion: "abc123", Versions: map[string]string{"KUBERAY_VERSION": "v1.5.0"}},
		Points: []growthPoint{
			{Clusters: 100, Operators: []operatorResult{
				createRun(operatorKray, 100, createFigures{27.3, 15.8, 17.5, 4.3, 7.9, 80.2, 1120, 410, ""}),
				createRun(operatorKubeRay, 100, createFigures{10.6, 1.703, 2.087, 3.2, 0.9, 67.1, 1205, 520, ""}),
			}},
			{Clusters: 1000, Operators: []operatorResult{
				createRun(operatorKray, 1000, createFigures{331, 190.2, 220.4, 47.1, 80.3, 261.5, 11400, 4300, "timed out"}),
				{Name: operatorKubeRay},
			}},
		},
	}
}

func TestRenderGrowthMarkdown(t *testing.T) {
	got := renderGrowthMarkdown(syntheticGrowth(), "bench/growth")
	for _, want := range []string{
		"### Growth: 100 and 1,000 clusters\n",
		"created at 10/s) on a fresh cluster per operator and N, with kruise-manager as kray recommends, pods starting at once, " +
			"and kwok nodes sized so that capacity never limits (4-5 nodes of 1,000 pods).",
		"Raw data: [`bench/growth/results.json`](bench/growth/results.json).",
		"```mermaid\n",
		"title \"Time to all ready (s), against clusters\"\n    x-axis [\"100\", \"1000\"]\n",
		"*blue: kray; not drawn (a value is missing): KubeRay v1.5.0*",
		"| clusters | all ready kray (s) | all ready KubeRay (s) | ratio | p50 kray (s) | p50 KubeRay (s) |",
		// CPU per cluster: 4.3 s / 100 = 43 ms; requests 1120 / 100; reconciles 410 / 100.
		"| 100 | 27.3 | 10.6 | 2.58 | 15.8 | 1.70 | 17.5 | 2.09 | 43.0 | 79.0 | 32.0 | 80.2 | 67.1 | 11.2 | 12.1 | 4.10 | 5.20 |\n",
		"| 1,000 | 331 | n/a | — | 190 | n/a | 220 | n/a | 47.1 | 80.3 | n/a | 262 | n/a | 11.4 | n/a | 4.30 | n/a |\n",
		"- kray at 1,000 clusters: timed out\n",
		"- kuberay at 1,000 clusters: not measured",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("growth section lacks %q; got:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Kruise alone") {
		t.Errorf("growth section has a Kruise alone column, but Kruise alone was not measured:\n%s", got)
	}
	if n := strings.Count(got, "\n| "); n != 3 {
		t.Errorf("growth table has %d lines starting with '| ', want a header and 2 rows", n)
	}
}

func TestRenderGrowthMarkdownWithKruiseAlone(t *testing.T) {
	res := syntheticGrowth()
	res.Config.Operators = append(res.Config.Operators, kruiseAlone)
	res.Points[0].Operators = append(res.Points[0].Operators, createRun(kruiseAlone, 100, createFigures{allReady: 20.1}))
	got := renderGrowthMarkdown(res, "bench/growth")
	for _, want := range []string{
		"| ratio | all ready Kruise alone (s) | p50 kray (s) |",
		"| 100 | 27.3 | 10.6 | 2.58 | 20.1 | 15.8 |",
		"| 1,000 | 331 | n/a | — | n/a | 190 |",
		"- kruise-alone at 1,000 clusters: not measured",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("growth section lacks %q; got:\n%s", want, got)
		}
	}
}

func TestCountList(t *testing.T) {
	tests := []struct {
		in   []int
		want string
	}{
		{[]int{100}, "100"},
		{[]int{100, 300}, "100 and 300"},
		{[]int{100, 300, 1000}, "100, 300 and 1,000"},
		{[]int{999, 1000000, 12345}, "999, 1,000,000 and 12,345"},
	}
	for _, tt := range tests {
		if got := countList(tt.in); got != tt.want {
			t.Errorf("countList(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSplice(t *testing.T) {
	mainBlock := mainSection.begin + "\nmain\n" + mainSection.end
	growthBlock := func(body string) string { return growthSection.begin + "\n" + body + growthSection.end }
	tests := []struct {
		name, text, want string
		sec              generatedSection
	}{{
		name: "growth replaces its block only",
		sec:  growthSection,
		text: "# T\n\n" + mainBlock + "\n\n" + growthBlock("old\n") + "\n\n## After\n",
		want: "# T\n\n" + mainBlock + "\n\n" + growthBlock("new\n") + "\n\n## After\n",
	}, {
		name: "growth goes just after the main block when it has no markers",
		sec:  growthSection,
		text: "# T\n\n" + mainBlock + "\n\n## After\n",
		want: "# T\n\n" + mainBlock + "\n\n" + growthBlock("new\n") + "\n\n## After\n",
	}, {
		name: "growth goes at the end without either block",
		sec:  growthSection,
		text: "# T\n\nprose\n\n",
		want: "# T\n\nprose\n\n" + growthBlock("new\n") + "\n",
	}, {
		name: "an empty report gets a title",
		sec:  growthSection,
		text: "",
		want: reportTitle + "\n" + growthBlock("new\n") + "\n",
	}, {
		name: "the main block leaves the growth block alone",
		sec:  mainSection,
		text: "# T\n\n" + mainBlock + "\n\n" + growthBlock("g\n") + "\n",
		want: "# T\n\n" + mainSection.begin + "\nnew\n" + mainSection.end + "\n\n" + growthBlock("g\n") + "\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.sec.splice(tt.text, "new\n")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("splice (-want +got):\n%s", diff)
			}
			again, err := tt.sec.splice(got, "new\n")
			if err != nil || again != got {
				t.Errorf("a second splice changed the report (error %v):\n%s", err, cmp.Diff(got, again))
			}
		})
	}
}

func TestSpliceRefusesABeginWithoutEnd(t *testing.T) {
	text := "# T\n\n" + growthSection.begin + "\nhalf a block\n"
	if _, err := growthSection.splice(text, "new\n"); err == nil {
		t.Error("splice accepted a begin marker with no end marker")
	}
}

func TestUpdateReportCreatesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.md")
	if err := updateReport(path, growthSection, "body\n"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := reportTitle + "\n" + growthSection.begin + "\nbody\n" + growthSection.end + "\n"; string(b) != want {
		t.Errorf("new report (-want +got):\n%s", cmp.Diff(want, string(b)))
	}
}
