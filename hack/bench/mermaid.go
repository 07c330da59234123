package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The benchmark's charts are Mermaid xychart-beta blocks in the report, which GitHub draws: the numbers
// stay text in the Markdown, and no image is generated or committed.

// palette colors a chart's series in order; a chart's caption names each series with its color.
var palette = []struct{ hex, name string }{
	{"#1f77b4", "blue"}, {"#ff7f0e", "orange"}, {"#2ca02c", "green"}, {"#9467bd", "purple"}, {"#8c564b", "brown"},
}

// xySeries is one series of a chart: bars or a line, one value per x category.
type xySeries struct {
	name   string
	line   bool
	values []float64
}

// xyChart renders a Mermaid xychart-beta block with its caption: the series drawn in palette order, a
// series with a value that is not a finite number left out (and said so).
func xyChart(title, yTitle string, xs []string, series []xySeries) string {
	var kept, dropped []string
	var body strings.Builder
	n := 0
	for _, s := range series {
		if !allFinite(s.values) {
			dropped = append(dropped, s.name)
			continue
		}
		kind := "bar"
		if s.line {
			kind = "line"
		}
		vals := make([]string, len(s.values))
		for i, v := range s.values {
			vals[i] = strconv.FormatFloat(round3(v), 'f', -1, 64)
		}
		fmt.Fprintf(&body, "    %s [%s]\n", kind, strings.Join(vals, ", "))
		kept = append(kept, fmt.Sprintf("%s: %s", palette[n%len(palette)].name, s.name))
		n++
	}
	if n == 0 || len(xs) == 0 {
		return fmt.Sprintf("*%s: no value to draw*\n\n", title)
	}
	colors := make([]string, 0, n)
	for i := range n {
		colors = append(colors, palette[i%len(palette)].hex)
	}
	quoted := make([]string, len(xs))
	for i, x := range xs {
		quoted[i] = strconv.Quote(x)
	}
	var w strings.Builder
	fmt.Fprintf(&w, "```mermaid\n%%%%{init: {\"themeVariables\": {\"xyChart\": {\"plotColorPalette\": \"%s\"}}}}%%%%\n", strings.Join(colors, ", "))
	fmt.Fprintf(&w, "xychart-beta\n    title %s\n    x-axis [%s]\n    y-axis %s\n%s```\n\n", strconv.Quote(title), strings.Join(quoted, ", "), strconv.Quote(yTitle), body.String())
	caption := strings.Join(kept, "; ")
	if len(dropped) > 0 {
		caption += "; not drawn (a value is missing): " + strings.Join(dropped, ", ")
	}
	fmt.Fprintf(&w, "*%s*\n\n", caption)
	return w.String()
}

func allFinite(values []float64) bool {
	for _, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return len(values) > 0
}

// round3 keeps three significant decimals, enough for a chart and short in the Markdown.
func round3(v float64) float64 {
	if v == 0 {
		return 0
	}
	p := math.Pow(10, 2-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}
