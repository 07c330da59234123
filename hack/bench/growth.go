package main

// The growth run (-growth=100,300,1000, `make bench-growth`): how each operator's create scenario grows
// with the number of clusters. Each (operator, count) pair gets its own fresh cluster, as in the main run;
// the results go to <out>/growth/ and to the report's growth section.

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// growthDir is the growth run's directory under the main run's output directory.
const growthDir = "growth"

// growthResults is everything a growth run measured; <out>/growth/results.json holds it verbatim.
type growthResults struct {
	// Config is the run's configuration; each point ran it with Clusters set to the point's count and the
	// create scenario alone (pointConfig).
	Config   config        `json:"config"`
	Machine  machine       `json:"machine"`
	Started  time.Time     `json:"started"`
	Finished time.Time     `json:"finished"`
	Points   []growthPoint `json:"points"`
}

// growthPoint is one cluster count and what each operator measured there, in -operators order.
type growthPoint struct {
	Clusters  int              `json:"clusters"`
	Operators []operatorResult `json:"operators"`
}

// parseGrowth parses -growth: comma-separated positive cluster counts in increasing order (empty: none).
func parseGrowth(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a cluster count", f)
		}
		if n <= 0 {
			return nil, fmt.Errorf("%d clusters: want at least 1", n)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("%d after %d: want increasing counts", n, out[len(out)-1])
		}
		out = append(out, n)
	}
	return out, nil
}

// pointConfig returns cfg as one point of a growth run measures it: n clusters, the create scenario alone;
// cfg itself is not modified.
func pointConfig(cfg config, n int) config {
	cfg.Clusters = n
	cfg.Scenarios = []string{scenarioCreate}
	return cfg
}

// measureFunc measures one operator on a fresh cluster: measure, or a fake in tests.
type measureFunc func(ctx context.Context, cfg config, op *operator) (operatorResult, error)

// runGrowth measures every operator of cfg.Operators at every count of cfg.Growth and writes the results,
// even partial ones, before it returns the first error.
func runGrowth(ctx context.Context, cfg config) error {
	ops := make([]*operator, len(cfg.Operators))
	for i, name := range cfg.Operators {
		op, err := newOperator(cfg, name)
		if err != nil {
			return err
		}
		ops[i] = op
	}
	res := &growthResults{Config: cfg, Machine: describeMachine(cfg.Root), Started: time.Now().UTC()}
	firstErr := res.grow(ctx, ops, measure)
	res.Finished = time.Now().UTC()
	if err := writeGrowth(cfg.OutDir, cfg.Report, res); err != nil {
		return err
	}
	return firstErr
}

// grow fills res.Points by measuring each operator, in order, at each count of res.Config.Growth, in
// order; it goes on after an error and returns the first one (or the context's, when cancelled first).
func (res *growthResults) grow(ctx context.Context, ops []*operator, measure measureFunc) error {
	res.Points = make([]growthPoint, len(res.Config.Growth))
	for i, n := range res.Config.Growth {
		res.Points[i].Clusters = n
	}
	var firstErr error
	for _, op := range ops {
		for i, n := range res.Config.Growth {
			if ctx.Err() != nil {
				if firstErr == nil {
					firstErr = ctx.Err()
				}
				return firstErr
			}
			log.Printf("===== %s, %d clusters =====", op.name, n)
			or, err := measure(ctx, pointConfig(res.Config, n), op)
			res.Points[i].Operators = append(res.Points[i].Operators, or)
			if err != nil {
				log.Printf("%s at %d clusters: %v", op.name, n, err)
				if firstErr == nil {
					firstErr = fmt.Errorf("%s at %d clusters: %w", op.name, n, err)
				}
			}
		}
	}
	return firstErr
}

// writeGrowth writes results.json to <outDir>/growth and rewrites the growth section of the report at
// report.
func writeGrowth(outDir, report string, res *growthResults) error {
	if err := writeJSON(filepath.Join(outDir, growthDir, resultsFile), res); err != nil {
		return err
	}
	return renderGrowthTo(outDir, report, res)
}

// renderGrowth rewrites the growth section (with its charts) from the growth results.json of
// cfg.GrowthRenderOnly; it measures nothing and leaves that file alone.
func renderGrowth(_ context.Context, cfg config) error {
	var res growthResults
	if err := readJSON(cfg.GrowthRenderOnly, &res); err != nil {
		return err
	}
	return renderGrowthTo(cfg.OutDir, cfg.Report, &res)
}

// renderGrowthTo rewrites the report's growth section, charts included.
func renderGrowthTo(outDir, report string, res *growthResults) error {
	dir := filepath.Join(outDir, growthDir)
	return updateReport(report, growthSection, renderGrowthMarkdown(res, relTo(report, dir)))
}

// growthMeasure reads one quantity from an operator's create scenario at a point of the given size.
type growthMeasure func(s *scenarioResult, clusters int) float64

// The quantities of the growth table and chart; "per cluster" divides the scenario's total by its count.
var (
	allReadyTime growthMeasure = func(s *scenarioResult, _ int) float64 { return figureValue(s, figureAllReady) }
	readyP50     growthMeasure = func(s *scenarioResult, _ int) float64 { return figureValue(s, figureP50) }
	readyP99     growthMeasure = func(s *scenarioResult, _ int) float64 { return figureValue(s, figureP99) }
	operatorCPU  growthMeasure = func(s *scenarioResult, n int) float64 { return 1000 * s.Operator.CPUSeconds / float64(n) }
	kruiseCPU    growthMeasure = func(s *scenarioResult, n int) float64 { return 1000 * s.Kruise.CPUSeconds / float64(n) }
	operatorRSS  growthMeasure = func(s *scenarioResult, _ int) float64 { return s.Operator.PeakRSSMiB }
	requests     growthMeasure = func(s *scenarioResult, n int) float64 { return s.Operator.totalRequests() / float64(n) }
	reconciles   growthMeasure = func(s *scenarioResult, n int) float64 { return s.Operator.Reconciles / float64(n) }
	// krayCPU is kray's cost with the kruise-manager that does its pod work.
	krayCPU growthMeasure = func(s *scenarioResult, n int) float64 { return operatorCPU(s, n) + kruiseCPU(s, n) }
)

// value is m of the named operator's create scenario at p, NaN when that operator has none.
func (p *growthPoint) value(name string, m growthMeasure) float64 {
	s := findScenario(findOperator(p.Operators, name), scenarioCreate)
	if s == nil {
		return math.NaN()
	}
	return m(s, p.Clusters)
}

// growthColumn is one column of the growth table: its header and its cell at a point.
type growthColumn struct {
	header string
	cell   func(p *growthPoint) string
}

func valueColumn(header, name string, m growthMeasure) growthColumn {
	return growthColumn{header, func(p *growthPoint) string { return threeDigits(p.value(name, m)) }}
}

func ratioColumn(header string, m growthMeasure) growthColumn {
	return growthColumn{header, func(p *growthPoint) string {
		return ratio(p.value(operatorKray, m), p.value(operatorKubeRay, m))
	}}
}

// growthColumns lists the table's columns; Kruise alone's time to all ready joins when it was measured.
func growthColumns(res *growthResults) []growthColumn {
	cols := []growthColumn{
		{"clusters", func(p *growthPoint) string { return thousands(p.Clusters) }},
		valueColumn("all ready kray (s)", operatorKray, allReadyTime),
		valueColumn("all ready KubeRay (s)", operatorKubeRay, allReadyTime),
		ratioColumn("ratio", allReadyTime),
	}
	if res.measured(kruiseAlone) {
		cols = append(cols, valueColumn("all ready Kruise alone (s)", kruiseAlone, allReadyTime))
	}
	return append(cols,
		valueColumn("p50 kray (s)", operatorKray, readyP50),
		valueColumn("p50 KubeRay (s)", operatorKubeRay, readyP50),
		valueColumn("p99 kray (s)", operatorKray, readyP99),
		valueColumn("p99 KubeRay (s)", operatorKubeRay, readyP99),
		valueColumn("CPU/cluster kray (ms)", operatorKray, operatorCPU),
		valueColumn("CPU/cluster kruise-manager, kray run (ms)", operatorKray, kruiseCPU),
		valueColumn("CPU/cluster KubeRay (ms)", operatorKubeRay, operatorCPU),
		valueColumn("peak RSS kray (MiB)", operatorKray, operatorRSS),
		valueColumn("peak RSS KubeRay (MiB)", operatorKubeRay, operatorRSS),
		valueColumn("requests/cluster kray", operatorKray, requests),
		valueColumn("requests/cluster KubeRay", operatorKubeRay, requests),
		valueColumn("reconciles/cluster kray", operatorKray, reconciles),
		valueColumn("reconciles/cluster KubeRay", operatorKubeRay, reconciles),
	)
}

// measured reports whether any point holds a result of the named operator.
func (res *growthResults) measured(name string) bool {
	for i := range res.Points {
		if findOperator(res.Points[i].Operators, name) != nil {
			return true
		}
	}
	return false
}

// renderGrowthMarkdown renders the growth section: heading, how it ran, chart, raw data, one table row
// per point and the errors; dir is the growth directory relative to the report, for the links.
func renderGrowthMarkdown(res *growthResults, dir string) string {
	var w bytes.Buffer
	cfg, m := res.Config, res.Machine
	fmt.Fprintf(&w, "### Growth: %s clusters\n\n", countList(res.Config.Growth))
	fmt.Fprintf(&w, "Each point is the *create* scenario alone (N RayClusters of 1 head + 3 workers created at %g/s) "+
		"on a fresh cluster per operator and N, with %s, %s, and kwok nodes sized so that capacity never limits%s. "+
		"p50 and p99 are per-cluster create→ready times; ratio is kray ÷ KubeRay of the time to all ready; "+
		"*/cluster* is the scenario's total ÷ N; requests are the operator's API requests, reconciles its RayCluster "+
		"reconciles; kruise-manager's CPU is that of kray's run (it does kray's pod work).\n\n",
		cfg.CreateRate, kruisePhrase(cfg), podStartPhrase(cfg), nodeRange(res.Points))
	fmt.Fprintf(&w, "Run %s → %s (UTC) on %d CPUs (%s), kray `%s`, KubeRay %s. Raw data: [`%s`](%s).\n\n",
		res.Started.Format(time.DateTime), res.Finished.Format(time.DateTime), m.NProc, m.CPU, m.KrayVersion,
		m.Versions["KUBERAY_VERSION"], filepath.Join(dir, resultsFile), filepath.Join(dir, resultsFile))
	w.WriteString(growthCharts(res))
	cols := growthColumns(res)
	cells := make([]string, len(cols))
	for i, c := range cols {
		cells[i] = c.header
	}
	fmt.Fprintf(&w, "| %s |\n|---|%s\n", strings.Join(cells, " | "), strings.Repeat("---:|", len(cols)-1))
	for i := range res.Points {
		for j, c := range cols {
			cells[j] = c.cell(&res.Points[i])
		}
		fmt.Fprintf(&w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(&w)
	if errs := growthErrors(res); len(errs) > 0 {
		fmt.Fprintf(&w, "Errors in this run:\n\n%s\n\n", strings.Join(errs, "\n"))
	}
	return w.String()
}

// growthErrors lists, as Markdown items, every point where an operator of the run has no create result
// or a failed one.
func growthErrors(res *growthResults) []string {
	var out []string
	for i := range res.Points {
		p := &res.Points[i]
		for _, name := range res.Config.Operators {
			s := findScenario(findOperator(p.Operators, name), scenarioCreate)
			switch {
			case s == nil:
				out = append(out, fmt.Sprintf("- %s at %s clusters: not measured (the run stopped before the scenario; see its log)", name, thousands(p.Clusters)))
			case s.Error != "":
				out = append(out, fmt.Sprintf("- %s at %s clusters: %s", name, thousands(p.Clusters), s.Error))
			}
		}
	}
	return out
}

// kruisePhrase describes kruise-manager's settings: its -kruise profile and, when on, its pod webhooks.
func kruisePhrase(cfg config) string {
	phrase := "kruise-manager profile " + cfg.KruiseProfile
	switch cfg.KruiseProfile {
	case "recommended":
		phrase = "kruise-manager as kray recommends"
	case "defaults":
		phrase = "kruise-manager at Kruise's own defaults"
	}
	if cfg.KruisePodWebhook {
		phrase += " with its pod webhooks on"
	}
	return phrase
}

// podStartPhrase describes how soon kwok starts a pod.
func podStartPhrase(cfg config) string {
	if cfg.PodStartDelay == 0 {
		return "pods starting at once"
	}
	return fmt.Sprintf("pods starting %s ± %s after they are scheduled", cfg.PodStartDelay, cfg.PodStartJitter)
}

// nodeRange is " (K nodes of P pods)" or " (K-L nodes of P pods)" from the clusters the points ran on, or
// empty when none recorded its nodes.
func nodeRange(points []growthPoint) string {
	lo, hi, pods := math.MaxInt, 0, ""
	for _, p := range points {
		for _, op := range p.Operators {
			n, err := strconv.Atoi(op.Cluster.Env["KRAY_NODES"])
			if err != nil {
				continue
			}
			lo, hi, pods = min(lo, n), max(hi, n), op.Cluster.Env["KRAY_NODE_PODS"]
		}
	}
	if hi == 0 {
		return ""
	}
	if p, err := strconv.Atoi(pods); err == nil {
		pods = thousands(p)
	}
	if lo == hi {
		return fmt.Sprintf(" (%d nodes of %s pods)", lo, pods)
	}
	return fmt.Sprintf(" (%d-%d nodes of %s pods)", lo, hi, pods)
}

// threeDigits writes v with three significant digits at most and none below the units from 100 up
// ("n/a" when not finite), for the growth table and chart.
func threeDigits(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "n/a"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// countList writes counts as prose: "100", "100 and 300", "100, 300 and 1,000".
func countList(counts []int) string {
	parts := make([]string, len(counts))
	for i, n := range counts {
		parts[i] = thousands(n)
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// thousands writes n with a comma between groups of three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}
