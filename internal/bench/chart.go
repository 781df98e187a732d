package bench

import (
	"fmt"
	"html"
	"strings"
)

// chart draws the throughput results as a horizontal bar chart in SVG,
// with the figures that are not rates (D's bytes, S's and G's ratios)
// as lines of text under it.
func chart(rep Report) string {
	type bar struct {
		label string
		value float64
		color string
		note  string
	}
	var bars []bar
	maxV := 0.0
	for _, r := range rep.Results {
		if r.Name == "D" || r.Name == "S" || r.Unit == "×" {
			continue
		}
		color := "#4c78a8"
		switch r.Via {
		case "http":
			color = "#f58518"
		case "sql":
			color = "#9d9d9d"
		}
		note := r.Unit
		if r.Pass != nil {
			if *r.Pass {
				note += " ✓"
			} else {
				note += " ✗"
			}
		}
		bars = append(bars, bar{fmt.Sprintf("%s (%s)", r.Name, r.Via), r.Rate, color, note})
		maxV = max(maxV, r.Rate)
	}
	const left, width, rowH = 150, 520, 24
	notes := 0
	for _, r := range rep.Results {
		if r.Name == "D" || r.Unit == "×" {
			notes++
		}
	}
	height := 70 + rowH*len(bars) + 18*notes + 24
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`, left+width+170, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`)
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="15" font-weight="bold">Queen Serverless — throughput (%d clients, %d partitions, PostgreSQL %s)</text>`,
		rep.Clients, rep.Partitions, html.EscapeString(rep.Postgres))
	fmt.Fprintf(&b, `<text x="10" y="42" fill="#555">blue: core · orange: HTTP · grey: raw INSERT ceiling</text>`)
	for i, br := range bars {
		y := 60 + i*rowH
		w := 0.0
		if maxV > 0 {
			w = br.value / maxV * width
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`, left-8, y+15, html.EscapeString(br.label))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`, left, y+3, w, rowH-6, br.color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%.0f %s</text>`, float64(left)+w+6, y+15, br.value, html.EscapeString(br.note))
	}
	y := 70 + rowH*len(bars)
	for _, r := range rep.Results {
		if r.Name == "D" || r.Unit == "×" {
			what := r.Name + " " + r.What
			if r.Name == "G" {
				what += fmt.Sprintf(" (stored %.3f, empty %.3f)", r.Stored, r.Empty)
			}
			fmt.Fprintf(&b, `<text x="10" y="%d">%s: %.2f %s (target %s)</text>`, y, html.EscapeString(what), r.Value, html.EscapeString(r.Unit), html.EscapeString(r.Target))
			y += 18
		}
	}
	b.WriteString(`</svg>`)
	return b.String()
}
