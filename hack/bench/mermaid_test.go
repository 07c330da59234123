package main

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A chart is a Mermaid block whose series follow the palette in order, with a caption that names them; a
// series with a missing value is left out and said so.
func TestXYChart(t *testing.T) {
	got := xyChart("Time", "s", []string{"100", "1000"}, []xySeries{
		{name: "kray", line: true, values: []float64{27.34567, 331}},
		{name: "KubeRay", line: true, values: []float64{10.6, math.NaN()}},
		{name: "ratio", values: []float64{0.0012345, 2}},
	})
	want := "```mermaid\n" +
		`%%{init: {"themeVariables": {"xyChart": {"plotColorPalette": "#1f77b4, #ff7f0e"}}}}%%` + "\n" +
		"xychart-beta\n    title \"Time\"\n    x-axis [\"100\", \"1000\"]\n    y-axis \"s\"\n" +
		"    line [27.3, 331]\n    bar [0.00123, 2]\n```\n\n" +
		"*blue: kray; orange: ratio; not drawn (a value is missing): KubeRay*\n\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chart (-want +got):\n%s", diff)
	}
}
