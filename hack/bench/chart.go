package main

import "math"

// panel is one measure drawn as a pair of bars, each panel scaled to its own larger value.
type panel struct {
	title         string
	kray, kuberay float64
	unit          string
}

// chartPanels picks the measures worth a picture: every time figure of every scenario, and the create
// scenario's CPU (kray plus kruise-manager against KubeRay) and API requests (likewise).
func chartPanels(res *results) []panel {
	kray, kuberay := findOp(res, operatorKray), findOp(res, operatorKubeRay)
	var out []panel
	for _, sc := range scenarioUnion(kray, kuberay) {
		a, b := findScenario(kray, sc.Name), findScenario(kuberay, sc.Name)
		for _, f := range sc.Figures {
			if f.Unit != "s" {
				continue
			}
			key := f.Key
			get := func(s *scenarioResult) float64 { return figureValue(s, key) }
			out = append(out, panel{title: sc.Name + " " + f.Key, kray: valueOf(a, row{get: get}), kuberay: valueOf(b, row{get: get}), unit: "s"})
		}
	}
	cpu := func(s *scenarioResult) float64 { return s.Operator.CPUSeconds + s.Kruise.CPUSeconds }
	reqs := func(s *scenarioResult) float64 { return s.Operator.totalRequests() + s.Kruise.totalRequests() }
	a, b := findScenario(kray, scenarioCreate), findScenario(kuberay, scenarioCreate)
	out = append(out,
		panel{title: "create CPU s (+kruise)", kray: valueOf(a, row{get: cpu}), kuberay: valueOf(b, row{get: func(s *scenarioResult) float64 { return s.Operator.CPUSeconds }}), unit: "s"},
		panel{title: "create API req (+kruise)", kray: valueOf(a, row{get: reqs}), kuberay: valueOf(b, row{get: func(s *scenarioResult) float64 { return s.Operator.totalRequests() }})},
	)
	return out
}

// ratioChart is the main chart: kray ÷ KubeRay for every panel, as bars, against a line at 1 (below it,
// kray is faster or uses less). A panel with a value missing on either side is left out.
func ratioChart(res *results) string {
	var xs []string
	var ratios, ones []float64
	for _, p := range chartPanels(res) {
		r := p.kray / p.kuberay
		if math.IsNaN(r) || math.IsInf(r, 0) {
			continue
		}
		xs = append(xs, p.title)
		ratios = append(ratios, r)
		ones = append(ones, 1)
	}
	return xyChart("kray ÷ KubeRay (below 1: kray faster or cheaper)", "ratio", xs,
		[]xySeries{{name: "kray ÷ KubeRay", values: ratios}, {name: "parity (1)", line: true, values: ones}})
}
