package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
)

var (
	colorKray    = color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	colorKubeRay = color.RGBA{0xff, 0x7f, 0x0e, 0xff}
	colorText    = color.RGBA{0x20, 0x20, 0x20, 0xff}
	colorAxis    = color.RGBA{0xb0, 0xb0, 0xb0, 0xff}
)

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

const (
	panelW, panelH = 170, 300
	headerH        = 60
	barW           = 50
	scale          = 2 // text scale for values and titles
)

// writeChart draws the panels side by side, with values above the bars and the ratio under each panel.
func writeChart(path string, res *results) error {
	panels := chartPanels(res)
	w := max(1, len(panels)) * panelW
	img := image.NewRGBA(image.Rect(0, 0, w+20, headerH+panelH+70))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	drawText(img, 10, 10, "KRAY VS KUBERAY, LOWER IS BETTER. RATIO = KRAY / KUBERAY", colorText, scale)
	fillRect(img, 10, 34, 14, 14, colorKray)
	drawText(img, 30, 34, "KRAY (+ KRUISE-MANAGER)", colorText, scale)
	fillRect(img, 330, 34, 14, 14, colorKubeRay)
	drawText(img, 350, 34, "KUBERAY V1.5.0", colorText, scale)
	for i, p := range panels {
		drawPanel(img, 10+i*panelW, headerH, p)
	}
	return writePNG(path, img)
}

// writePNG encodes img as a PNG file at path.
func writePNG(path string, img image.Image) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func drawPanel(img *image.RGBA, x0, y0 int, p panel) {
	top := math.Max(nanTo0(p.kray), nanTo0(p.kuberay))
	base := y0 + panelH - 40 // bars stand on this line
	maxBar := panelH - 90
	fillRect(img, x0+8, base, panelW-16, 1, colorAxis)
	for i, v := range []float64{p.kray, p.kuberay} {
		c := []color.RGBA{colorKray, colorKubeRay}[i]
		bx := x0 + 20 + i*(barW+14)
		h := 0
		if top > 0 && !math.IsNaN(v) {
			h = int(math.Round(v / top * float64(maxBar)))
		}
		fillRect(img, bx, base-h, barW, h, c)
		drawText(img, bx, base-h-18, shortNum(v), colorText, 1)
	}
	for j, line := range wrap(strings.ToUpper(p.title), (panelW-10)/(6*1)) {
		drawText(img, x0+8, base+8+j*10, line, colorText, 1)
	}
	r := "RATIO " + strings.ReplaceAll(ratio(p.kray, p.kuberay), "—", "N/A")
	drawText(img, x0+8, y0+panelH+5, r, colorText, scale)
}

func nanTo0(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

func shortNum(v float64) string {
	switch {
	case math.IsNaN(v):
		return "N/A"
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// wrap splits s into lines of at most n runes, at spaces where possible.
func wrap(s string, n int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) <= n:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	return append(lines, line)
}

func fillRect(img *image.RGBA, x, y, w, h int, c color.Color) {
	draw.Draw(img, image.Rect(x, y, x+w, y+h), image.NewUniform(c), image.Point{}, draw.Src)
}

// drawText draws s with the 5×7 font, each font pixel a k×k square, advancing 6k pixels per rune.
func drawText(img *image.RGBA, x, y int, s string, c color.Color, k int) {
	for _, r := range strings.ToUpper(s) {
		g := glyphs[r]
		for row := 0; row < 7; row++ {
			for col := 0; col < 5; col++ {
				if g[row]&(0x10>>col) != 0 {
					fillRect(img, x+col*k, y+row*k, k, k, c)
				}
			}
		}
		x += 6 * k
	}
}
