// Command bench measures kray against KubeRay's operator on the local cluster of hack/cluster.sh, one
// operator after the other in one run, and writes docs/bench/results.json and docs/benchmarks.md (between
// its generated markers), charts included.
//
// Each operator gets a fresh cluster (cluster.sh down --purge, then up) in its own state directory and on
// its own ports, so that it never touches the default .local/ instance. The operator under test runs out of
// cluster as the cluster admin; its metrics endpoint and /proc entries are sampled before and after every
// scenario. For kray, kruise-manager does the pod work and is sampled the same way.
//
// With -growth=100,300,1000 it runs instead only the create scenario, at each of those cluster counts on a
// fresh cluster per operator and count, and writes docs/bench/growth/ and the report's growth section
// (growth.go); `make bench-growth` runs that.
//
// hack/bench/bench.sh builds both operators and runs this program; `make bench` calls the script.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// config is everything a run depends on; it is recorded verbatim in the results.
type config struct {
	Root          string   `json:"-"`
	LocalDir      string   `json:"localDir"`
	KrayBinary    string   `json:"krayBinary"`
	KubeRayBinary string   `json:"kuberayBinary"`
	KubeRayCRDs   string   `json:"kuberayCRDs"`
	Operators     []string `json:"operators"`
	// Scenarios, when set, runs only the named scenarios (a partial run, for profiling; never committed).
	Scenarios     []string      `json:"scenarios,omitempty"`
	Clusters      int           `json:"clusters"`
	CreateRate    float64       `json:"createRatePerSecond"`
	ScaleTo       int           `json:"scaleTo"`
	SmallClusters int           `json:"smallClusters"`
	DownClusters  int           `json:"scaleDownClusters"`
	DownPerClust  int           `json:"deletionsPerCluster"`
	Evictions     int           `json:"evictions"`
	Timeout       time.Duration `json:"scenarioTimeout"`
	Settle        time.Duration `json:"settle"`
	// PodStartDelay and PodStartJitter make kwok start each pod after delay +- jitter (uniform) instead of
	// at once: the user's time on real nodes, where images and `ray start` take seconds.
	PodStartDelay  time.Duration `json:"podStartDelay"`
	PodStartJitter time.Duration `json:"podStartJitter"`
	// KruiseProfile is hack/cluster.sh's KRAY_KRUISE_PROFILE: recommended (kray's settings) or defaults.
	KruiseProfile string `json:"kruiseProfile"`
	// KruisePodWebhook is hack/cluster.sh's KRAY_KRUISE_POD_WEBHOOK: Kruise's pod webhooks on, as in a default
	// Kruise install.
	KruisePodWebhook bool     `json:"kruisePodWebhook,omitempty"`
	KrayArgs         []string `json:"krayExtraArgs"`
	KubeRayArgs      []string `json:"kuberayExtraArgs"`
	OutDir           string   `json:"-"`
	Report           string   `json:"-"`
	// RenderOnly, when set, names a results.json to render again (report and chart) without measuring.
	RenderOnly string `json:"-"`
	// Growth, when set, makes this a growth run: the create scenario alone at each of these cluster counts
	// (growth.go).
	Growth []int `json:"growth,omitempty"`
	// GrowthRenderOnly, when set, names a growth results.json to render again without measuring.
	GrowthRenderOnly string `json:"-"`
}

func main() {
	cfg := parseFlags()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	run := run
	switch {
	case cfg.RenderOnly != "":
		run = render
	case cfg.GrowthRenderOnly != "":
		run = renderGrowth
	case len(cfg.Growth) > 0:
		run = runGrowth
	}
	if err := run(ctx, cfg); err != nil {
		log.Fatalf("bench: %v", err)
	}
}

func parseFlags() config {
	root, err := os.Getwd()
	if err != nil {
		log.Fatal(err)
	}
	cfg := config{Root: root}
	var ops, only, krayArgs, kuberayArgs, growth string
	flag.StringVar(&cfg.LocalDir, "local-dir", filepath.Join(root, ".local-bench"), "state directory of the benchmark cluster (never .local)")
	flag.StringVar(&cfg.KrayBinary, "kray", filepath.Join(root, "bin/kray-operator"), "kray operator binary")
	flag.StringVar(&cfg.KubeRayBinary, "kuberay", filepath.Join(root, "bin/tools/kuberay-"+pinnedVersions(root)["KUBERAY_VERSION"]+"/ray-operator"), "KubeRay operator binary")
	flag.StringVar(&cfg.KubeRayCRDs, "kuberay-crds", "", "KubeRay's config/crd/bases directory (required when kuberay runs)")
	flag.StringVar(&ops, "operators", "kray,kuberay,"+kruiseAlone, "operators to measure, in order ("+kruiseAlone+": no operator, kray's built objects applied directly)")
	flag.StringVar(&only, "scenarios", "", "comma-separated scenarios to run (default: all)")
	flag.IntVar(&cfg.Clusters, "clusters", 100, "RayClusters (1 head + 3 workers) created in the create scenario")
	flag.Float64Var(&cfg.CreateRate, "rate", 10, "RayClusters created per second")
	flag.IntVar(&cfg.ScaleTo, "scale-to", 500, "workers of the big cluster in the scale scenario")
	flag.IntVar(&cfg.SmallClusters, "small-clusters", 20, "small clusters created while the big one scales")
	flag.IntVar(&cfg.DownClusters, "down-clusters", 10, "clusters in the scale-down scenario")
	flag.IntVar(&cfg.DownPerClust, "down-per-cluster", 10, "named workers deleted per cluster in the scale-down scenario")
	flag.IntVar(&cfg.Evictions, "evictions", 20, "head evictions (one at a time, each on its own cluster)")
	flag.DurationVar(&cfg.Timeout, "timeout", 15*time.Minute, "limit for each scenario")
	flag.DurationVar(&cfg.Settle, "settle", 10*time.Second, "extra watch time after a scenario to catch late creations/deletions")
	flag.StringVar(&cfg.KruiseProfile, "kruise", "recommended", "kruise-manager settings: recommended (kray's) or defaults (Kruise's own)")
	flag.BoolVar(&cfg.KruisePodWebhook, "kruise-pod-webhook", false, "turn Kruise's PodWebhook gate on: every pod create, update, deletion and eviction passes through kruise-manager, as in a default Kruise install")
	flag.DurationVar(&cfg.PodStartDelay, "pod-start-delay", 0, "time kwok takes to start a pod (0: at once)")
	flag.DurationVar(&cfg.PodStartJitter, "pod-start-jitter", 0, "uniform jitter around -pod-start-delay (at most the delay)")
	flag.StringVar(&krayArgs, "kray-args", "", "extra kray flags, space separated")
	flag.StringVar(&kuberayArgs, "kuberay-args", "", "extra KubeRay flags, space separated")
	flag.StringVar(&cfg.OutDir, "out", filepath.Join(root, "docs/bench"), "directory for results.json")
	flag.StringVar(&cfg.Report, "report", filepath.Join(root, "docs/benchmarks.md"), "report whose generated section is rewritten")
	flag.StringVar(&cfg.RenderOnly, "render-only", "", "re-render the report (and its chart) from this results.json; measure nothing")
	flag.StringVar(&growth, "growth", "", "comma-separated, increasing cluster counts: run only the create scenario at each, "+
		"on a fresh cluster per operator and count, and write <out>/growth/ and the report's growth section")
	flag.StringVar(&cfg.GrowthRenderOnly, "growth-render-only", "", "re-render the growth section (and its charts) from this growth results.json; measure nothing")
	flag.Parse()
	if cfg.Growth, err = parseGrowth(growth); err != nil {
		log.Fatalf("bench: -growth: %v", err)
	}
	if modes := btoi(cfg.RenderOnly != "") + btoi(cfg.GrowthRenderOnly != "") + btoi(len(cfg.Growth) > 0); modes > 1 {
		log.Fatal("bench: -render-only, -growth and -growth-render-only exclude each other")
	}
	cfg.Operators = strings.Split(ops, ",")
	if only != "" {
		cfg.Scenarios = strings.Split(only, ",")
	}
	cfg.KrayArgs = strings.Fields(krayArgs)
	cfg.KubeRayArgs = strings.Fields(kuberayArgs)
	if cfg.PodStartJitter > cfg.PodStartDelay {
		log.Fatal("bench: -pod-start-jitter must not exceed -pod-start-delay")
	}
	if filepath.Base(cfg.LocalDir) == ".local" {
		log.Fatal("bench: refusing to use .local, the default cluster's state directory")
	}
	return cfg
}

// run measures every operator in cfg.Operators and writes the results, even partial ones, before it
// returns the first error.
func run(ctx context.Context, cfg config) error {
	res := &results{Config: cfg, Machine: describeMachine(cfg.Root), Started: time.Now().UTC()}
	var firstErr error
	for _, name := range cfg.Operators {
		op, err := newOperator(cfg, name)
		if err != nil {
			return err
		}
		log.Printf("===== %s =====", name)
		or, err := measure(ctx, cfg, op)
		res.Operators = append(res.Operators, or)
		if err != nil {
			log.Printf("%s: %v", name, err)
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", name, err)
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	res.Finished = time.Now().UTC()
	if err := writeResults(cfg, res); err != nil {
		return err
	}
	return firstErr
}

// btoi is 1 for true and 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// runs reports whether the scenario named name is part of this run.
func (cfg config) runs(name string) bool {
	return len(cfg.Scenarios) == 0 || slices.Contains(cfg.Scenarios, name)
}

// render rewrites the report, its chart included, from cfg.RenderOnly, keeping the recorded run's configuration.
func render(_ context.Context, cfg config) error {
	res, err := readResults(cfg.RenderOnly)
	if err != nil {
		return err
	}
	res.Config.OutDir, res.Config.Report = cfg.OutDir, cfg.Report
	return updateReport(cfg.Report, mainSection, renderMarkdown(res.Config, res))
}

// measure brings up a fresh cluster, runs op and every scenario against it, and brings the cluster down.
// The returned result holds whatever was measured before an error.
func measure(ctx context.Context, cfg config, op *operator) (or operatorResult, err error) {
	or = operatorResult{Name: op.name, Flags: op.args}
	cl := newLocalCluster(cfg, op.name)
	or.Cluster = cl.describe()
	defer func() {
		if derr := cl.down(false); derr != nil && err == nil {
			err = derr
		}
	}()
	if err = cl.down(true); err != nil {
		return or, err
	}
	if err = cl.up(ctx); err != nil {
		return or, err
	}
	or.KruiseFlags, err = cl.kruiseFlags()
	if err != nil {
		return or, err
	}
	env, err := newEnv(ctx, cfg, cl, op)
	if err != nil {
		return or, err
	}
	defer env.close()
	or.KruiseRunning = true // kruise-manager runs (idle for KubeRay) in both runs; see the report.
	for _, sc := range scenarios(cfg) {
		if ctx.Err() != nil {
			return or, ctx.Err()
		}
		if op.name == kruiseAlone && !sc.floor || !cfg.runs(sc.name) {
			continue
		}
		log.Printf("%s: scenario %s", op.name, sc.name)
		sr := env.runScenario(ctx, sc)
		or.Scenarios = append(or.Scenarios, sr)
		if sr.Error != "" {
			log.Printf("%s: scenario %s: %s", op.name, sc.name, sr.Error)
		}
	}
	return or, nil
}
