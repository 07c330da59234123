package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// File names of a run's raw data and chart, in its output directory.
const (
	resultsFile = "results.json"
)

// results is everything one run measured; docs/bench/results.json holds it verbatim.
type results struct {
	Config    config           `json:"config"`
	Machine   machine          `json:"machine"`
	Started   time.Time        `json:"started"`
	Finished  time.Time        `json:"finished"`
	Operators []operatorResult `json:"operators"`
}

type operatorResult struct {
	Name    string      `json:"name"`
	Flags   []string    `json:"flags"`
	Cluster clusterInfo `json:"cluster"`
	// KruiseFlags is kruise-manager's command line as cluster.sh started it; it runs in both operators'
	// clusters (idle in KubeRay's) and is sampled in both.
	KruiseFlags   []string         `json:"kruiseFlags"`
	KruiseRunning bool             `json:"kruiseRunning"`
	Scenarios     []scenarioResult `json:"scenarios"`
}

type scenarioResult struct {
	Name        string     `json:"name"`
	Title       string     `json:"title"`
	Seconds     float64    `json:"seconds"`
	Figures     []figure   `json:"figures"`
	PodsCreated int        `json:"podsCreated"`
	PodsDesired int        `json:"podsDesired"`
	Operator    procSample `json:"operator"` // deltas over the scenario; peak RSS is the high-water mark at its end
	Kruise      procSample `json:"kruiseManager"`
	Error       string     `json:"error,omitempty"`
}

// MarshalJSON writes a NaN value (not measured) as null.
func (f figure) MarshalJSON() ([]byte, error) {
	type plain figure
	if math.IsNaN(f.Value) {
		return json.Marshal(struct {
			plain
			Value *float64 `json:"value"`
		}{plain: plain(f)})
	}
	return json.Marshal(plain(f))
}

// UnmarshalJSON reads a null value back as NaN.
func (f *figure) UnmarshalJSON(b []byte) error {
	type plain figure
	var v struct {
		plain
		Value *float64 `json:"value"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = figure(v.plain)
	f.Value = math.NaN()
	if v.Value != nil {
		f.Value = *v.Value
	}
	return nil
}

// readResults loads a results.json written by an earlier run.
func readResults(path string) (*results, error) {
	var res results
	if err := readJSON(path, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// readJSON decodes the file at path into v.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// writeJSON writes v to path, indented, with a final newline.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

type machine struct {
	NProc       int               `json:"nproc"`
	CPU         string            `json:"cpu"`
	MemTotal    string            `json:"memTotal"`
	Kernel      string            `json:"kernel"`
	GoVersion   string            `json:"goVersion"`
	KrayVersion string            `json:"krayVersion"`
	Versions    map[string]string `json:"versions"`
}

// describeMachine records the host and the pinned versions (hack/versions.env, KubeRay's among them).
func describeMachine(root string) machine {
	m := machine{NProc: runtime.NumCPU(), Versions: pinnedVersions(root)}
	m.CPU = procField("/proc/cpuinfo", "model name")
	m.MemTotal = procField("/proc/meminfo", "MemTotal")
	m.Kernel = strings.TrimSpace(commandOutput(root, "uname", "-r"))
	m.GoVersion = strings.TrimSpace(commandOutput(root, "go", "version"))
	m.KrayVersion = strings.TrimSpace(commandOutput(root, "git", "describe", "--tags", "--always", "--dirty"))
	return m
}

// pinnedVersions are the KEY=value lines of hack/versions.env, empty when it cannot be read.
func pinnedVersions(root string) map[string]string {
	out := map[string]string{}
	if b, err := os.ReadFile(filepath.Join(root, "hack/versions.env")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
				out[k] = v
			}
		}
	}
	return out
}

func procField(file, key string) string {
	b, _ := os.ReadFile(file)
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func commandOutput(dir, name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, _ := cmd.Output()
	return string(out)
}

// writeResults writes results.json to cfg.OutDir and rewrites the generated section of cfg.Report (its
// chart included), keeping everything outside its markers.
func writeResults(cfg config, res *results) error {
	if err := writeJSON(filepath.Join(cfg.OutDir, resultsFile), res); err != nil {
		return err
	}
	return updateReport(cfg.Report, mainSection, renderMarkdown(cfg, res))
}

// generatedSection is a block of a report that the harness owns: the text between its two markers.
type generatedSection struct {
	begin, end string
	// after is the text the block is inserted after when the report lacks the markers; empty or absent
	// from the report: the block goes at the end.
	after string
}

var (
	// mainSection is the main run's block (`make bench`).
	mainSection = generatedSection{
		begin: "<!-- BEGIN GENERATED by `make bench` (hack/bench): do not edit by hand -->",
		end:   "<!-- END GENERATED -->",
	}
	// growthSection is the growth run's block (`make bench-growth`), placed after the main one.
	growthSection = generatedSection{
		begin: "<!-- BEGIN GENERATED growth by `make bench-growth` (hack/bench -growth): do not edit by hand -->",
		end:   "<!-- END GENERATED growth -->",
		after: mainSection.end,
	}
)

// reportTitle heads a report that did not exist before.
const reportTitle = "# Benchmarks: kray vs KubeRay\n"

// updateReport replaces the block of sec in the report at path with body, or adds the block (creating
// the file if needed), keeping everything outside it.
func updateReport(path string, sec generatedSection, body string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	text, err := sec.splice(string(old), body)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, []byte(text), 0o644)
}

// splice returns text with the block of sec holding body: in place of the existing block, else just after
// sec.after, else at the end; it fails on a begin marker with no end marker after it.
func (sec generatedSection) splice(text, body string) (string, error) {
	block := sec.begin + "\n" + body + sec.end
	if i := strings.Index(text, sec.begin); i >= 0 {
		j := strings.Index(text[i:], sec.end)
		if j < 0 {
			return "", fmt.Errorf("%q has no %q after it", sec.begin, sec.end)
		}
		return text[:i] + block + text[i+j+len(sec.end):], nil
	}
	if text == "" {
		return reportTitle + "\n" + block + "\n", nil
	}
	if k := strings.Index(text, sec.after); sec.after != "" && k >= 0 {
		k += len(sec.after)
		return text[:k] + "\n\n" + block + text[k:], nil
	}
	return strings.TrimRight(text, "\n") + "\n\n" + block + "\n", nil
}

// renderMarkdown renders the generated section: machine, the comparison table, API requests, flags.
func renderMarkdown(cfg config, res *results) string {
	var w bytes.Buffer
	dir := relDir(cfg)
	fmt.Fprintf(&w, "Run %s → %s (UTC). Raw data: [`%s`](%s).\n\n",
		res.Started.Format(time.DateTime), res.Finished.Format(time.DateTime), filepath.Join(dir, resultsFile), filepath.Join(dir, resultsFile))
	switch cfg.KruiseProfile {
	case "defaults":
		fmt.Fprintf(&w, "**Kruise:** kruise-manager with Kruise's own defaults (the flags are listed at the end).\n\n")
	case "recommended":
		fmt.Fprintf(&w, "**Kruise:** kruise-manager as kray recommends (`hack/cluster.sh`'s KRUISE_RECOMMENDED_ARGS; the flags are listed at the end).\n\n")
	}
	if cfg.KruisePodWebhook {
		fmt.Fprintf(&w, "**Kruise pod webhooks:** on (the `PodWebhook` gate, as in a default Kruise install): every pod create, update (not status), deletion and eviction passes through kruise-manager, for both operators.\n\n")
	}
	if cfg.PodStartDelay > 0 {
		fmt.Fprintf(&w, "**Pod start:** kwok makes each pod Running %s ± %s after it is scheduled (uniform), as a real node "+
			"pulling an image and running `ray start` would; the readiness gates follow as usual.\n\n", cfg.PodStartDelay, cfg.PodStartJitter)
	} else {
		fmt.Fprintf(&w, "**Pod start:** at once (kwok's zero-delay profile: every control-plane write is on the critical path).\n\n")
	}
	m := res.Machine
	fmt.Fprintf(&w, "**Machine:** %d CPUs (%s), %s memory, Linux %s, %s. **kray:** `%s`.\n", m.NProc, m.CPU, m.MemTotal, m.Kernel, m.GoVersion, m.KrayVersion)
	fmt.Fprintf(&w, "**Versions:** KubeRay %s, Kubernetes %s, etcd %s, kwok %s, OpenKruise %s.\n\n",
		m.Versions["KUBERAY_VERSION"], m.Versions["KUBERNETES_VERSION"], m.Versions["ETCD_VERSION"], m.Versions["KWOK_VERSION"], m.Versions["KRUISE_VERSION"])
	w.WriteString(ratioChart(res))
	kray, kuberay := findOp(res, operatorKray), findOp(res, operatorKubeRay)
	writeComparison(&w, kray, kuberay, findOp(res, kruiseAlone))
	writeRequests(&w, res)
	writeFlags(&w, cfg, res)
	writeErrors(&w, res)
	return w.String()
}

// relDir is the output directory relative to the report's, for the report's links.
func relDir(cfg config) string { return relTo(cfg.Report, cfg.OutDir) }

// relTo is dir relative to the directory of the report at report, or dir itself when there is no such path.
func relTo(report, dir string) string {
	if rel, err := filepath.Rel(filepath.Dir(report), dir); err == nil {
		return filepath.ToSlash(rel)
	}
	return dir
}

func findOp(res *results, name string) *operatorResult { return findOperator(res.Operators, name) }

// findOperator returns the result of the operator named name in ops, or nil.
func findOperator(ops []operatorResult, name string) *operatorResult {
	for i := range ops {
		if ops[i].Name == name {
			return &ops[i]
		}
	}
	return nil
}

func findScenario(op *operatorResult, name string) *scenarioResult {
	if op == nil {
		return nil
	}
	for i := range op.Scenarios {
		if op.Scenarios[i].Name == name {
			return &op.Scenarios[i]
		}
	}
	return nil
}

// row is one line of the comparison table: a label and a value getter applied to each operator.
type row struct {
	label string
	unit  string
	get   func(*scenarioResult) float64
	exact bool // always three decimals (a ratio that must read 1.000)
}

// rowsFor lists the comparison rows of a scenario: its figures, pods created per pod desired, and the
// processes' CPU, peak RSS and API requests.
func rowsFor(sr *scenarioResult) []row {
	var rows []row
	for _, f := range sr.Figures {
		key := f.Key
		rows = append(rows, row{label: f.Label, unit: f.Unit, get: func(s *scenarioResult) float64 { return figureValue(s, key) }})
	}
	return append(rows,
		row{label: "pods created per pod desired", get: func(s *scenarioResult) float64 {
			return float64(s.PodsCreated) / float64(s.PodsDesired)
		}, exact: true},
		row{label: "operator CPU", unit: "s", get: func(s *scenarioResult) float64 { return s.Operator.CPUSeconds }},
		row{label: "kruise-manager CPU", unit: "s", get: func(s *scenarioResult) float64 { return s.Kruise.CPUSeconds }},
		row{label: "operator peak RSS (VmHWM)", unit: "MiB", get: func(s *scenarioResult) float64 { return s.Operator.PeakRSSMiB }},
		row{label: "kruise-manager peak RSS (VmHWM)", unit: "MiB", get: func(s *scenarioResult) float64 { return s.Kruise.PeakRSSMiB }},
		row{label: "operator API requests", get: func(s *scenarioResult) float64 { return s.Operator.totalRequests() }},
		row{label: "RayCluster reconciles", get: func(s *scenarioResult) float64 { return s.Operator.Reconciles }},
		row{label: "kruise-manager API requests", get: func(s *scenarioResult) float64 { return s.Kruise.totalRequests() }},
	)
}

func figureValue(s *scenarioResult, key string) float64 {
	for _, f := range s.Figures {
		if f.Key == key {
			return f.Value
		}
	}
	return math.NaN()
}

func writeComparison(w *bytes.Buffer, kray, kuberay, floor *operatorResult) {
	fmt.Fprintf(w, "### kray vs KubeRay\n\n")
	fmt.Fprintf(w, "Ratio is kray ÷ KubeRay (below 1: kray is faster or uses less). kray's side runs on kruise-manager, "+
		"whose CPU and memory are listed beside kray's; in KubeRay's cluster kruise-manager runs idle.")
	if floor != nil {
		fmt.Fprintf(w, " *Kruise alone* applies the Service, Advanced StatefulSet and CloneSet kray would build, with no "+
			"operator (create and scale only): the floor under kray's latency; *÷ floor* is kray ÷ Kruise alone.")
	}
	fmt.Fprintf(w, "\n\n| scenario | measure | kray | KubeRay | ratio |")
	if floor != nil {
		fmt.Fprintf(w, " Kruise alone | ÷ floor |\n|---|---|---:|---:|---:|---:|---:|\n")
	} else {
		fmt.Fprintf(w, "\n|---|---|---:|---:|---:|\n")
	}
	for _, sc := range scenarioUnion(kray, kuberay) {
		a, b, f := findScenario(kray, sc.Name), findScenario(kuberay, sc.Name), findScenario(floor, sc.Name)
		for i, r := range rowsFor(&sc) {
			title := ""
			if i == 0 {
				title = "**" + sc.Name + "**: " + sc.Title
			}
			va, vb := valueOf(a, r), valueOf(b, r)
			label := r.label
			if r.unit != "" {
				label += " (" + r.unit + ")"
			}
			format := num
			if r.exact {
				format = func(v float64) string { return fmt.Sprintf("%.3f", v) }
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |", title, label, format(va), format(vb), ratio(va, vb))
			if floor != nil {
				vf := math.NaN()
				if f != nil && !strings.HasPrefix(r.label, "operator ") {
					vf = valueOf(f, r)
				}
				if math.IsNaN(vf) {
					fmt.Fprintf(w, " n/a | — |")
				} else {
					fmt.Fprintf(w, " %s | %s |", format(vf), ratio(va, vf))
				}
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w)
}

// scenarioUnion lists the scenarios either operator ran, in run order, so a failed side still shows.
func scenarioUnion(ops ...*operatorResult) []scenarioResult {
	var out []scenarioResult
	seen := map[string]bool{}
	for _, op := range ops {
		if op == nil {
			continue
		}
		for _, sc := range op.Scenarios {
			if !seen[sc.Name] {
				seen[sc.Name] = true
				out = append(out, sc)
			}
		}
	}
	return out
}

func valueOf(s *scenarioResult, r row) float64 {
	if s == nil {
		return math.NaN()
	}
	return r.get(s)
}

func num(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "n/a"
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// writeRequests lists API requests per HTTP method, per scenario and process (GET covers get, list and
// watch; non-2xx answers, e.g. 409 conflicts, are counted separately).
func writeRequests(w *bytes.Buffer, res *results) {
	methods := []string{"GET", "POST", "PUT", "PATCH", "DELETE"}
	fmt.Fprintf(w, "### API requests by verb\n\nFrom `rest_client_requests_total{method,code}` scraped before and after each scenario. "+
		"GET includes list and watch requests.\n\n")
	fmt.Fprintf(w, "| scenario | process | %s | non-2xx |\n|---|---|%s---:|\n", strings.Join(methods, " | "), strings.Repeat("---:|", len(methods)))
	for _, op := range res.Operators {
		for _, sc := range op.Scenarios {
			for _, p := range []struct {
				name string
				s    procSample
			}{{op.Name, sc.Operator}, {"kruise-manager (" + op.Name + " run)", sc.Kruise}} {
				cells := make([]string, len(methods))
				for i, m := range methods {
					cells[i] = num(p.s.Requests[m])
				}
				fmt.Fprintf(w, "| %s | %s | %s | %s |\n", sc.Name, p.name, strings.Join(cells, " | "), errorSummary(p.s.Errors))
			}
		}
	}
	fmt.Fprintln(w)
}

func errorSummary(errs map[string]float64) string {
	if len(errs) == 0 {
		return "0"
	}
	keys := make([]string, 0, len(errs))
	for k := range errs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %s", k, num(errs[k]))
	}
	return strings.Join(parts, ", ")
}

func writeFlags(w *bytes.Buffer, cfg config, res *results) {
	fmt.Fprintf(w, "### Flags\n\n")
	fmt.Fprintf(w, "- harness: `-clusters=%d -rate=%g -scale-to=%d -small-clusters=%d -down-clusters=%d -down-per-cluster=%d -evictions=%d -settle=%s -timeout=%s -pod-start-delay=%s -pod-start-jitter=%s`; "+
		"each RayCluster container requests and limits 1 CPU / 1Gi; nothing is deleted between scenarios.\n",
		cfg.Clusters, cfg.CreateRate, cfg.ScaleTo, cfg.SmallClusters, cfg.DownClusters, cfg.DownPerClust, cfg.Evictions, cfg.Settle, cfg.Timeout, cfg.PodStartDelay, cfg.PodStartJitter)
	for _, op := range res.Operators {
		fmt.Fprintf(w, "- %s: `%s` (every other flag at its default)\n", op.Name, strings.Join(op.Flags, " "))
	}
	if len(res.Operators) > 0 {
		op := res.Operators[0]
		fmt.Fprintf(w, "- kruise-manager (as `hack/cluster.sh` starts it, read from /proc): `%s`; unset flags keep kruise %s's defaults: "+
			"`--rest-config-qps=30 --rest-config-burst=50 --cloneset-workers=3 --statefulset-workers=3`\n",
			strings.Join(op.KruiseFlags, " "), res.Machine.Versions["KRUISE_VERSION"])
		keys := make([]string, 0, len(op.Cluster.Env))
		for k := range op.Cluster.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + op.Cluster.Env[k]
		}
		fmt.Fprintf(w, "- cluster (`hack/cluster.sh up`, fresh per operator): `%s`\n", strings.Join(parts, " "))
	}
	fmt.Fprintln(w)
}

func writeErrors(w *bytes.Buffer, res *results) {
	var lines []string
	for _, op := range res.Operators {
		for _, sc := range op.Scenarios {
			if sc.Error != "" {
				lines = append(lines, fmt.Sprintf("- %s / %s: %s", op.Name, sc.Name, sc.Error))
			}
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "### Errors in this run\n\n%s\n\n", strings.Join(lines, "\n"))
}
