package main

import "strconv"

// growthPanel is one measure against the cluster counts xs, one series per operator line.
type growthPanel struct {
	title, unit string
	xs          []int
	series      []xySeries
}

// operatorLabel names an operator of the growth run in a chart's caption.
func operatorLabel(res *growthResults, name string) string {
	switch name {
	case operatorKray:
		return "kray"
	case operatorKubeRay:
		return "KubeRay " + res.Machine.Versions["KUBERAY_VERSION"]
	}
	return "Kruise alone"
}

// growthPanels lists the growth charts: time to all ready, per-cluster p50, CPU per cluster (kray with
// kruise-manager, and kray alone) and operator peak RSS, one line per operator of the run.
func growthPanels(res *growthResults) []growthPanel {
	xs := make([]int, len(res.Points))
	for i, p := range res.Points {
		xs[i] = p.Clusters
	}
	line := func(label, name string, m growthMeasure) xySeries {
		s := xySeries{name: label, line: true, values: make([]float64, len(res.Points))}
		for i := range res.Points {
			s.values[i] = res.Points[i].value(name, m)
		}
		return s
	}
	perOperator := func(m func(name string) []xySeries) []xySeries {
		var out []xySeries
		for _, name := range res.Config.Operators {
			out = append(out, m(name)...)
		}
		return out
	}
	same := func(m growthMeasure) func(string) []xySeries {
		return func(name string) []xySeries { return []xySeries{line(operatorLabel(res, name), name, m)} }
	}
	cpu := func(name string) []xySeries {
		switch name {
		case operatorKray:
			return []xySeries{line("kray with kruise-manager", name, krayCPU), line("kray alone", name, operatorCPU)}
		case kruiseAlone:
			return []xySeries{line("Kruise alone (kruise-manager)", name, kruiseCPU)}
		}
		return []xySeries{line(operatorLabel(res, name), name, operatorCPU)}
	}
	rss := func(name string) []xySeries {
		if name == kruiseAlone {
			return nil // no operator process
		}
		return []xySeries{line(operatorLabel(res, name), name, operatorRSS)}
	}
	return []growthPanel{
		{title: "Time to all ready", unit: "s", xs: xs, series: perOperator(same(allReadyTime))},
		{title: "Per-cluster create→ready p50", unit: "s", xs: xs, series: perOperator(same(readyP50))},
		{title: "Operator CPU per cluster", unit: "ms", xs: xs, series: perOperator(cpu)},
		{title: "Operator peak RSS", unit: "MiB", xs: xs, series: perOperator(rss)},
	}
}

// growthCharts renders one line chart per growth panel, against the number of clusters.
func growthCharts(res *growthResults) string {
	out := ""
	for _, p := range growthPanels(res) {
		xs := make([]string, len(p.xs))
		for i, x := range p.xs {
			xs[i] = strconv.Itoa(x)
		}
		out += xyChart(p.title+" ("+p.unit+"), against clusters", p.unit, xs, p.series)
	}
	return out
}
