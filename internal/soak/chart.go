package soak

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strings"
	"time"
)

// series is one line of a panel: y per sample.
type series struct {
	name   string
	color  string
	dashed bool
	y      []float64
}

var palette = []string{"#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d"}

// chart draws the run over time in SVG, in the style of `make bench`'s
// results.svg: sizes, dead tuples, latencies and the reaper's backlog,
// one panel each, with the long transactions shaded.
func chart(r *Report) string {
	const width, left, right, panelH, gap, top = 900, 70, 230, 170, 50, 100
	xs := make([]float64, len(r.Samples))
	for i, s := range r.Samples {
		xs[i] = s.ElapsedS / 60
	}
	xmax := r.Settings.DurationS / 60
	var start time.Time
	if len(r.Samples) > 0 {
		start = r.Samples[0].At.Add(-time.Duration(r.Samples[0].ElapsedS * float64(time.Second)))
	}
	var bands [][2]float64
	for _, t := range r.LongTransactions {
		if !t.End.IsZero() {
			bands = append(bands, [2]float64{t.Start.Sub(start).Minutes(), t.End.Sub(start).Minutes()})
		}
	}
	panels := []struct {
		title string
		lines []series
	}{
		{"size on disk (MB): schema queen and its largest tables", sizeSeries(r.Samples, r.Backlog)},
		{"dead tuples (pg_stat_user_tables), all tables", []series{{name: "dead tuples", color: palette[3], y: pick(r.Samples, func(s Sample) float64 { return float64(s.DeadTuples) })}}},
		{"latency (ms): p99 solid, p50 dashed", latencySeries(r.Samples)},
		{"reaper backlog (largest per interval) and group lag", backlogSeries(r.Samples)},
	}
	height := top + len(panels)*(panelH+gap) + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`, width, height)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>`)
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="15" font-weight="bold">Queen Serverless — soak, %s at %.0f msg/s, %d partitions, %d groups, PostgreSQL %s</text>`,
		fmtElapsed(time.Duration(r.Settings.DurationS*float64(time.Second))), r.AchievedRate, r.Settings.Partitions,
		r.Settings.Groups, html.EscapeString(r.Postgres))
	stored := ""
	if bl := r.Backlog; bl != nil {
		stored = fmt.Sprintf("; stored beside it: %d messages over %d partitions, not due", bl.Messages, bl.Partitions)
	}
	fmt.Fprintf(&b, `<text x="10" y="42" fill="#555">shaded: a %.0f s REPEATABLE READ transaction held open; retention %.0f s, dedup window %.0f s%s</text>`,
		r.Settings.LongTxForS, r.Settings.RetentionS, r.Settings.DedupWindowS, html.EscapeString(stored))
	fmt.Fprintf(&b, `<text x="10" y="62" fill="#555">%s</text>`, html.EscapeString(r.Summary()))
	for i, p := range panels {
		y0 := top + i*(panelH+gap)
		panel(&b, p.title, p.lines, xs, xmax, bands, left, y0, width-left-right, panelH)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func pick(samples []Sample, f func(Sample) float64) []float64 {
	out := make([]float64, len(samples))
	for i, s := range samples {
		out[i] = f(s)
	}
	return out
}

// sizeSeries is the total, the size before the traffic (with the stored
// backlog) and the tables that end up largest.
func sizeSeries(samples []Sample, b *BacklogReport) []series {
	out := []series{{name: "total", color: "#333", y: pick(samples, func(s Sample) float64 { return float64(s.TotalBytes) / 1e6 })}}
	if len(samples) == 0 {
		return out
	}
	if b != nil {
		out = append(out, series{name: "before the traffic", color: "#333", dashed: true,
			y: pick(samples, func(Sample) float64 { return float64(b.BaseBytes) / 1e6 })})
	}
	var tables []Relation
	for _, rel := range samples[len(samples)-1].Relations {
		if rel.Kind == "table" {
			tables = append(tables, rel)
		}
	}
	sort.Slice(tables, func(i, j int) bool { return tables[i].TotalBytes > tables[j].TotalBytes })
	for i, t := range tables[:min(5, len(tables))] {
		name := t.Name
		out = append(out, series{name: name, color: palette[i%len(palette)], y: pick(samples, func(s Sample) float64 {
			for _, rel := range s.Relations {
				if rel.Name == name {
					return float64(rel.TotalBytes) / 1e6
				}
			}
			return 0
		})})
	}
	return out
}

// latencySeries leaves out intervals without requests (NaN: no point).
func latencySeries(samples []Sample) []series {
	var out []series
	for i, op := range opNames {
		q := func(p99 bool) func(Sample) float64 {
			return func(s Sample) float64 {
				switch l := s.Latency[op]; {
				case l.N == 0:
					return math.NaN()
				case p99:
					return l.P99MS
				default:
					return l.P50MS
				}
			}
		}
		out = append(out, series{name: op + " p99", color: palette[i], y: pick(samples, q(true))},
			series{name: op + " p50", color: palette[i], dashed: true, y: pick(samples, q(false))})
	}
	return out
}

func backlogSeries(samples []Sample) []series {
	return []series{
		{name: "leases", color: palette[0], y: pick(samples, func(s Sample) float64 { return float64(s.Backlog.Leases) })},
		{name: "dedup keys", color: palette[1], y: pick(samples, func(s Sample) float64 { return float64(s.Backlog.Dedup) })},
		{name: "retention", color: palette[2], y: pick(samples, func(s Sample) float64 { return float64(s.Backlog.Retention) })},
		{name: "lag (all groups)", color: "#999", dashed: true, y: pick(samples, func(s Sample) float64 { return float64(s.totalLag()) })},
	}
}

// panel draws one panel: axes, shaded bands, lines and their legend.
func panel(b *strings.Builder, title string, lines []series, xs []float64, xmax float64, bands [][2]float64, x0, y0, w, h int) {
	ymax := 0.0
	for _, l := range lines {
		for _, y := range l.y {
			if !math.IsNaN(y) {
				ymax = max(ymax, y)
			}
		}
	}
	ymax = niceCeil(ymax)
	px := func(x float64) float64 { return float64(x0) + x/math.Max(xmax, 1e-9)*float64(w) }
	py := func(y float64) float64 { return float64(y0+h) - y/ymax*float64(h) }
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s</text>`, x0, y0-8, html.EscapeString(title))
	for _, bd := range bands {
		fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#eee"/>`, px(bd[0]), y0, px(bd[1])-px(bd[0]), h)
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`, x0, y0, w, h)
	for i := 0; i <= 4; i++ {
		y := ymax * float64(i) / 4
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`, x0-6, py(y)+4, fmtAxis(y))
		if i > 0 && i < 4 {
			fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`, x0, x0+w, py(y), py(y))
		}
	}
	step := math.Max(1, niceCeil(xmax/6))
	for x := 0.0; x <= xmax+1e-9; x += step {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s min</text>`, px(x), y0+h+14, fmtAxis(x))
	}
	for i, l := range lines {
		var pts []string
		for j, y := range l.y {
			if j < len(xs) && !math.IsNaN(y) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(xs[j]), py(y)))
			}
		}
		dash := ""
		if l.dashed {
			dash = ` stroke-dasharray="5,3"`
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.6"%s points="%s"/>`, l.color, dash, strings.Join(pts, " "))
		ly := y0 + 12 + i*15
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`, x0+w+10, x0+w+30, ly-4, ly-4, l.color, dash)
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`, x0+w+36, ly, html.EscapeString(l.name))
	}
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 for 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func fmtAxis(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.3g", v)
}
