package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"math"
	"sort"
)

var (
	colorKruiseAlone = color.RGBA{0x2c, 0xa0, 0x2c, 0xff}
	colorGrid        = color.RGBA{0xe4, 0xe4, 0xe4, 0xff}
)

// Layout of the growth chart, in pixels: a grid of line panels under a header.
const (
	growthCols             = 2
	growthPanelW           = 540
	growthPanelH           = 330
	growthHeaderH          = 76
	growthMargin           = 10
	plotLeft, plotRight    = 56, 34 // room for the y tick labels; for the last point's labels
	plotTop, plotBottom    = 44, 46 // room for the title and note; for the x tick labels and axis name
	markerSize             = 7      // side of a point's square marker
	lineWidth              = 2      // of every series' line
	dashOn, dashOff        = 7, 5   // a dashed line's pattern
	labelScale             = 1      // text scale of the point values and ticks
	glyphW, glyphH         = 6, 7   // a rune's advance and height at scale 1
	labelGap               = 3      // between a label and its marker, or two labels
	yTicks                 = 4      // about this many gridlines above zero
	headroom               = 1.15   // the y axis reaches this much above the largest value
	legendSwatchW, legendY = 26, 40 // a legend entry's line sample; the legend's row
	axisTitle              = "CLUSTERS"
)

// growthSeries is one line of a growth panel: a value per point (NaN or infinite: not drawn).
type growthSeries struct {
	color  color.RGBA
	dashed bool
	values []float64
}

// growthPanel is one measure against the cluster counts xs.
type growthPanel struct {
	title, note string
	xs          []int
	series      []growthSeries
}

// operatorColor is the line color of an operator of the growth chart.
func operatorColor(name string) color.RGBA {
	switch name {
	case operatorKray:
		return colorKray
	case operatorKubeRay:
		return colorKubeRay
	}
	return colorKruiseAlone
}

// growthPanels lists the growth chart's panels: time to all ready, per-cluster p50, CPU per cluster (kray
// with kruise-manager, and dashed alone) and operator peak RSS, one line per operator of the run.
func growthPanels(res *growthResults) []growthPanel {
	xs := make([]int, len(res.Points))
	for i, p := range res.Points {
		xs[i] = p.Clusters
	}
	line := func(name string, m growthMeasure, dashed bool) growthSeries {
		s := growthSeries{color: operatorColor(name), dashed: dashed, values: make([]float64, len(res.Points))}
		for i := range res.Points {
			s.values[i] = res.Points[i].value(name, m)
		}
		return s
	}
	perOperator := func(m func(name string) []growthSeries) []growthSeries {
		var out []growthSeries
		for _, name := range res.Config.Operators {
			out = append(out, m(name)...)
		}
		return out
	}
	same := func(m growthMeasure) func(string) []growthSeries {
		return func(name string) []growthSeries { return []growthSeries{line(name, m, false)} }
	}
	cpu := func(name string) []growthSeries {
		switch name {
		case operatorKray:
			return []growthSeries{line(name, krayCPU, false), line(name, operatorCPU, true)}
		case kruiseAlone:
			return []growthSeries{line(name, kruiseCPU, false)}
		}
		return []growthSeries{line(name, operatorCPU, false)}
	}
	rss := func(name string) []growthSeries {
		if name == kruiseAlone {
			return nil // no operator process
		}
		return []growthSeries{line(name, operatorRSS, false)}
	}
	return []growthPanel{
		{title: "TIME TO ALL READY (S)", xs: xs, series: perOperator(same(allReadyTime))},
		{title: "PER-CLUSTER CREATE->READY P50 (S)", xs: xs, series: perOperator(same(readyP50))},
		{title: "OPERATOR CPU PER CLUSTER (MS)", note: "KRAY: SOLID WITH KRUISE-MANAGER, DASHED ALONE", xs: xs, series: perOperator(cpu)},
		{title: "OPERATOR PEAK RSS (MIB)", xs: xs, series: perOperator(rss)},
	}
}

// writeGrowthChart draws the growth panels in a grid under a title and a legend.
func writeGrowthChart(path string, res *growthResults) error {
	panels := growthPanels(res)
	rows := (len(panels) + growthCols - 1) / growthCols
	img := image.NewRGBA(image.Rect(0, 0, 2*growthMargin+growthCols*growthPanelW, growthHeaderH+rows*growthPanelH+growthMargin))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	title := fmt.Sprintf("GROWTH: CREATE N RAYCLUSTERS AT %g/S, FRESH CLUSTER PER POINT. LOWER IS BETTER.", res.Config.CreateRate)
	drawText(img, growthMargin, growthMargin, title, colorText, scale)
	x := growthMargin
	for _, name := range res.Config.Operators {
		label := map[string]string{operatorKray: "KRAY", operatorKubeRay: "KUBERAY " + res.Machine.Versions["KUBERAY_VERSION"],
			kruiseAlone: "KRUISE ALONE"}[name]
		x = drawLegendEntry(img, x, legendY, label, operatorColor(name), false)
		if name == operatorKray {
			x = drawLegendEntry(img, x, legendY, "KRAY ALONE (CPU)", colorKray, true)
		}
	}
	for i, p := range panels {
		drawGrowthPanel(img, growthMargin+(i%growthCols)*growthPanelW, growthHeaderH+(i/growthCols)*growthPanelH, p)
	}
	return writePNG(path, img)
}

// drawLegendEntry draws a line sample and its label at (x, y) and returns the x of the next entry.
func drawLegendEntry(img *image.RGBA, x, y int, label string, c color.RGBA, dashed bool) int {
	drawLine(img, x, y+7, x+legendSwatchW, y+7, c, dashed)
	drawMarker(img, x+legendSwatchW/2, y+7, c, dashed)
	drawText(img, x+legendSwatchW+8, y, label, colorText, scale)
	return x + legendSwatchW + 8 + len(label)*glyphW*scale + 30
}

// drawGrowthPanel draws one panel with its top-left corner at (x0, y0): title, gridlines with y ticks,
// x ticks at the cluster counts, and each series as a line with its values labelled at the points.
func drawGrowthPanel(img *image.RGBA, x0, y0 int, p growthPanel) {
	drawText(img, x0+8, y0+4, p.title, colorText, scale)
	if p.note != "" {
		drawText(img, x0+8, y0+24, p.note, colorText, labelScale)
	}
	left, right := x0+plotLeft, x0+growthPanelW-plotRight
	top, bottom := y0+plotTop, y0+growthPanelH-plotBottom
	xMax := 1
	for _, x := range p.xs {
		xMax = max(xMax, x)
	}
	px := func(x int) int { return left + int(math.Round(float64(x)/float64(xMax)*float64(right-left))) }
	step := niceStep(maxValue(p.series) * headroom / yTicks)
	yMax := step * math.Ceil(maxValue(p.series)*headroom/step)
	// Zero sits above the x axis, leaving room for a label under a point at zero.
	zero := bottom - (markerSize/2 + 1 + 2*labelGap + glyphH*labelScale)
	py := func(v float64) int { return zero - int(math.Round(v/yMax*float64(zero-top))) }
	for v := 0.0; v <= yMax+step/2; v += step {
		y := py(v)
		fillRect(img, left, y, right-left, 1, colorGrid)
		t := tickLabel(v, step)
		drawText(img, left-8-len(t)*glyphW*labelScale, y-glyphH*labelScale/2, t, colorText, labelScale)
	}
	fillRect(img, left, top, 1, bottom-top+1, colorAxis)
	fillRect(img, left, bottom, right-left+1, 1, colorAxis)
	for _, x := range p.xs {
		t := thousands(x)
		fillRect(img, px(x), bottom, 1, 5, colorAxis)
		drawText(img, px(x)-len(t)*glyphW*labelScale/2, bottom+9, t, colorText, labelScale)
	}
	drawText(img, right-len(axisTitle)*glyphW*labelScale, bottom+26, axisTitle, colorText, labelScale)
	for _, s := range p.series {
		prev := -1
		for i, v := range s.values {
			if !finite(v) {
				prev = -1
				continue
			}
			if prev >= 0 {
				drawLine(img, px(p.xs[prev]), py(s.values[prev]), px(p.xs[i]), py(v), s.color, s.dashed)
			}
			prev = i
		}
	}
	var marks []image.Point
	var sizes []image.Point
	var texts []string
	var colors []growthSeries
	for i, x := range p.xs {
		for _, s := range p.series {
			if v := s.values[i]; finite(v) {
				t := threeDigits(v)
				marks = append(marks, image.Pt(px(x), py(v)))
				sizes = append(sizes, image.Pt(len(t)*glyphW*labelScale-labelScale, glyphH*labelScale))
				texts, colors = append(texts, t), append(colors, s)
			}
		}
	}
	bounds := image.Rect(left+2, y0+plotTop-10, x0+growthPanelW-4, bottom)
	for i, r := range placeLabels(marks, sizes, bounds) {
		drawMarker(img, marks[i].X, marks[i].Y, colors[i].color, colors[i].dashed)
		drawText(img, r.Min.X, r.Min.Y, texts[i], colors[i].color, labelScale)
	}
}

// placeLabels returns, for each marker centred at marks[i], a box of size sizes[i] inside bounds for its
// label: above the marker, else below, left or right of it, else the nearest free place above, else
// below; no box overlaps another box or any marker (with labelGap to spare) unless bounds leave no room.
func placeLabels(marks, sizes []image.Point, bounds image.Rectangle) []image.Rectangle {
	half := markerSize / 2
	var busy []image.Rectangle
	for _, m := range marks {
		busy = append(busy, image.Rect(m.X-half, m.Y-half, m.X-half+markerSize, m.Y-half+markerSize).Inset(-labelGap))
	}
	free := func(r image.Rectangle) bool {
		if !r.In(bounds) {
			return false
		}
		for _, b := range busy {
			if r.Overlaps(b) {
				return false
			}
		}
		return true
	}
	// Left to right, and top to bottom in a column, so the higher value of a column gets the place above.
	order := make([]int, len(marks))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ma, mb := marks[order[a]], marks[order[b]]
		return ma.X < mb.X || ma.X == mb.X && ma.Y < mb.Y
	})
	out := make([]image.Rectangle, len(marks))
	for _, i := range order {
		m, w, h := marks[i], sizes[i].X, sizes[i].Y
		at := func(x, y int) image.Rectangle { return image.Rect(x, y, x+w, y+h) }
		cx := max(bounds.Min.X, min(m.X-w/2, bounds.Max.X-w))
		above, below := m.Y-half-labelGap-h, m.Y-half+markerSize+labelGap
		candidates := []image.Rectangle{at(cx, above), at(cx, below),
			at(m.X-half-labelGap-w, m.Y-h/2), at(m.X-half+markerSize+labelGap, m.Y-h/2)}
		for y := above - 1; y >= bounds.Min.Y; y-- {
			candidates = append(candidates, at(cx, y))
		}
		for y := below + 1; y+h <= bounds.Max.Y; y++ {
			candidates = append(candidates, at(cx, y))
		}
		out[i] = candidates[0]
		for _, c := range candidates {
			if free(c) {
				out[i] = c
				break
			}
		}
		busy = append(busy, out[i].Inset(-labelGap))
	}
	return out
}

// drawLine draws a line lineWidth pixels thick from (x1, y1) to (x2, y2), dashed or solid.
func drawLine(img *image.RGBA, x1, y1, x2, y2 int, c color.Color, dashed bool) {
	n := max(abs(x2-x1), abs(y2-y1), 1)
	// The dash pattern runs along the line's length, not its pixel steps.
	length := math.Hypot(float64(x2-x1), float64(y2-y1))
	for i := 0; i <= n; i++ {
		t := float64(i) / float64(n)
		if dashed && int(t*length)%(dashOn+dashOff) >= dashOn {
			continue
		}
		x := x1 + int(math.Round(t*float64(x2-x1)))
		y := y1 + int(math.Round(t*float64(y2-y1)))
		fillRect(img, x-lineWidth/2, y-lineWidth/2, lineWidth, lineWidth, c)
	}
}

// drawMarker draws a square marker centred on (x, y): filled, or hollow for a dashed series.
func drawMarker(img *image.RGBA, x, y int, c color.Color, hollow bool) {
	half := markerSize / 2
	fillRect(img, x-half, y-half, markerSize, markerSize, c)
	if hollow {
		fillRect(img, x-half+2, y-half+2, markerSize-4, markerSize-4, color.White)
	}
}

// maxValue is the largest measured value of the series, or 1 when none is positive.
func maxValue(series []growthSeries) float64 {
	top := 0.0
	for _, s := range series {
		for _, v := range s.values {
			if finite(v) {
				top = math.Max(top, v)
			}
		}
	}
	if top <= 0 {
		return 1
	}
	return top
}

// niceStep is the smallest of 1, 2 or 5 times a power of ten that is at least x (x > 0).
func niceStep(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, f := range []float64{1, 2, 5} {
		if f*p >= x {
			return f * p
		}
	}
	return 10 * p
}

// tickLabel writes the tick value v with as many decimals as step needs.
func tickLabel(v, step float64) string {
	return fmt.Sprintf("%.*f", max(0, -int(math.Floor(math.Log10(step)))), v)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
