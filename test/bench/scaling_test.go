package bench

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/turbokafka/turbo/config"
)

// BenchmarkScaling: what a record costs as the work grows, one dimension at
// a time, everything else as in the no-op scenario (key ordering, 8
// partitions, 1,000 keys, concurrency 16, no-op handler, one turbo run per
// point):
//
//   - partitions: 8, 64, 512, 4,096 (one member owns them all; at least
//     8 keys a partition, so that every partition has records), on the
//     sarama side and again on the franz-go side, and each plain client
//     over the same topics (what the client itself costs as partitions
//     grow);
//   - distinct keys: 10, 10,000, 1,000,000 (every record's key its own at
//     the last point);
//   - concurrency: 10, 100, 1,000 with a 5 ms handler and 400 records per
//     runner, so each point's ideal is 2 s; max_buffered is 20 records per
//     runner (100 ms of work each, the longest sarama waits before it
//     fetches again once every partition is paused);
//   - value size: 100 B, 10 KiB, 1 MiB, at most scalingBytes of values per
//     point, so the record count falls as the size grows.
//
// Each point reports throughput, CPU per record and peak RSS; the table
// goes to .bench/scaling.md and each dimension's curves to
// .bench/scaling-<dimension>.png (under make bench-kafka,
// scaling-kafka-<line>.md and scaling-kafka-<line>-<dimension>.png); the
// targets are judged by judgeScaling.
func BenchmarkScaling(b *testing.B) {
	s := sizes()
	bro := brokers(b)
	partitionPoints := []float64{8, 64, 512, 4096}
	scaleParts := func(x float64) (job, string) {
		j := newTopicWith(b, bro, "scale-parts", topicSpec{records: s.scaleRecords, partitions: int(x), keyOf: uniformKeys(max(1000, 8*int(x)))})
		j.concurrency = 16
		return j, fmt.Sprintf("%s records, %d partitions", thousands(float64(s.scaleRecords)), int(x))
	}
	// TURBO_BENCH_SCALING names the dimensions to run (comma-separated,
	// e.g. partitions,partitions-franz); all when unset.
	only := os.Getenv("TURBO_BENCH_SCALING")
	dim := func(name, label string, p peer, xs []float64, setup func(x float64) (job, string)) []scalingDim {
		if only != "" && !slices.Contains(strings.Split(only, ","), name) {
			return nil
		}
		return []scalingDim{scaleDimension(b, name, label, p, xs, setup)}
	}
	var dims []scalingDim
	for range b.N {
		dims = slices.Concat(dims,
			dim("partitions", "partitions", turbo(config.OrderingKey), partitionPoints, scaleParts),
			dim("partitions-franz", "partitions, franz-go side", turboFranz(config.OrderingKey), partitionPoints, scaleParts),
			// The clients alone over the same topics: how much of turbo's
			// curve is the client's own.
			dim("partitions-plain", "partitions, plain sarama", plainSarama(), partitionPoints, scaleParts),
			dim("partitions-plain-franz", "partitions, plain franz-go", plainFranz(), partitionPoints, scaleParts),
			dim("keys", "distinct keys", turbo(config.OrderingKey), []float64{10, 10_000, float64(s.scaleRecords)}, func(x float64) (job, string) {
				j := newTopicWith(b, bro, "scale-keys", topicSpec{records: s.scaleRecords, partitions: partitions, keyOf: uniformKeys(int(x))})
				j.concurrency = 16
				return j, fmt.Sprintf("%s records, %s distinct keys", thousands(float64(s.scaleRecords)), thousands(x))
			}),
			dim("concurrency", "concurrency (5 ms handler)", turbo(config.OrderingKey), []float64{10, 100, 1000}, func(x float64) (job, string) {
				n := int(x) * s.scalePerRunner
				j := newTopicWith(b, bro, "scale-conc", topicSpec{records: n, partitions: partitions, keyOf: uniformKeys(n)})
				j.concurrency, j.work, j.maxBuffered = int(x), 5*time.Millisecond, 20*int(x)
				ideal := time.Duration(s.scalePerRunner) * j.work
				return j, fmt.Sprintf("%s records, concurrency %d, 5 ms each (ideal %s)", thousands(float64(n)), int(x), human(ideal))
			}),
			dim("record-size", "value bytes", turbo(config.OrderingKey), []float64{100, 10 << 10, 1 << 20}, func(x float64) (job, string) {
				n := min(s.scaleRecords, int(s.scalingBytes/int64(x)))
				j := newTopicWith(b, bro, "scale-size", topicSpec{records: n, partitions: partitions, keyOf: uniformKeys(1000), valueBytes: int(x)})
				j.concurrency = 16
				return j, fmt.Sprintf("%s records of %s values", thousands(float64(n)), bytesLabel(int(x)))
			}),
		)
	}
	writeScaling(b, dims)
	judgeScaling(dims)
}

// judgeScaling judges the targets of the scaling table: peak RSS flat in
// distinct keys; CPU per record at 512 partitions within 1.5× of 8, and at
// 4,096 within 2× and under 200 MiB; the most runners within 15 % of the
// ideal.
func judgeScaling(dims []scalingDim) {
	for _, d := range dims {
		if (d.name != "partitions" && d.name != "partitions-franz") || len(d.points) < 4 {
			continue
		}
		at8, at512, at4096 := d.points[0], d.points[2], d.points[3]
		judge(d.label+": CPU per record at 512 partitions ≤ 1.5× that at 8", at8.cpuUS > 0 && at512.cpuUS > 0,
			at512.cpuUS <= 1.5*at8.cpuUS, "%.2f µs against %.2f µs (%.2f×)", at512.cpuUS, at8.cpuUS, at512.cpuUS/at8.cpuUS)
		judge(d.label+": CPU per record at 4,096 partitions ≤ 2× that at 8", at8.cpuUS > 0 && at4096.cpuUS > 0,
			at4096.cpuUS <= 2*at8.cpuUS, "%.2f µs against %.2f µs (%.2f×)", at4096.cpuUS, at8.cpuUS, at4096.cpuUS/at8.cpuUS)
		judge(d.label+": peak RSS at 4,096 partitions ≤ 200 MiB", at4096.rssMiB > 0,
			at4096.rssMiB <= 200, "%.0f MiB", at4096.rssMiB)
	}
	// What the client alone does from 8 to 4,096 partitions: the part of
	// turbo's curve it cannot go below. Shown, not judged.
	for _, d := range dims {
		if (d.name != "partitions-plain" && d.name != "partitions-plain-franz") || len(d.points) < 4 {
			continue
		}
		at8, at512, at4096 := d.points[0], d.points[2], d.points[3]
		if at8.cpuUS > 0 {
			show(d.label+": CPU per record at 512 and 4,096 partitions against 8, peak RSS at 4,096",
				"%.2f× and %.2f× (%.2f, %.2f, %.2f µs); %.0f MiB",
				at512.cpuUS/at8.cpuUS, at4096.cpuUS/at8.cpuUS, at8.cpuUS, at512.cpuUS, at4096.cpuUS, at4096.rssMiB)
		}
	}
	for _, d := range dims {
		if d.name != "concurrency" || len(d.points) < 3 {
			continue
		}
		p := d.points[len(d.points)-1]
		judge(fmt.Sprintf("concurrency %s (5 ms handler): turbo within 15 %% of the ideal", thousands(p.x)), p.idealTime > 0,
			p.idealTime <= 1.15, "%.3f× the ideal", p.idealTime)
	}
	for _, d := range dims {
		if d.name != "keys" || len(d.points) < 3 || d.points[0].rssMiB == 0 {
			continue
		}
		few, many := d.points[0].rssMiB, d.points[len(d.points)-1].rssMiB
		grow := many / few
		judge(fmt.Sprintf("memory: peak RSS at %s distinct keys within 20 %% of 10 keys", thousands(d.points[len(d.points)-1].x)),
			true, grow <= 1.2, "%.0f MiB against %.0f MiB (%.2f×)", many, few, grow)
	}
}

// scalingDim is one dimension's measured points.
type scalingDim struct {
	name, label string
	points      []scalePoint
}

// scalePoint is one run: x, and what it cost.
type scalePoint struct {
	x         float64
	what      string
	perSec    float64 // records committed per second of wall time
	cpuUS     float64 // CPU µs per record
	rssMiB    float64 // peak RSS
	idealTime float64 // wall time over the ideal (concurrency points), else 0
}

// scaleDimension runs p once per x, on the job setup(x) returns, and
// records each run as a row of the table.
func scaleDimension(b *testing.B, name, label string, p peer, xs []float64, setup func(x float64) (job, string)) scalingDim {
	d := scalingDim{name: name, label: label}
	for _, x := range xs {
		j, what := setup(x)
		o := runPeer(b, p, j, limits{cap: runCap})
		pt := scalePoint{x: x, what: what}
		ratioTo, r := "", 0.0
		if o.na == "" && o.done && o.wall > 0 {
			pt.perSec = o.rate()
			pt.cpuUS = float64(o.cpu.Microseconds()) / float64(j.records)
			pt.rssMiB = float64(o.rss) / (1 << 20)
			if j.work > 0 {
				r = timeRatio(o, j.records, time.Duration(j.records)*j.work/time.Duration(j.concurrency))
				pt.idealTime, ratioTo = r, "the ideal (time)"
			}
		}
		record(row("scaling, "+label+": "+what, p.name, o, r, ratioTo))
		d.points = append(d.points, pt)
	}
	return d
}

// writeScaling writes .bench/scaling.md and one PNG per dimension.
func writeScaling(b *testing.B, dims []scalingDim) {
	dir := filepath.Join(moduleRoot, ".bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	var md strings.Builder
	fmt.Fprintf(&md, "%s, %s; broker: %s; turbo, key ordering, sarama side unless said, one run per point.\n\n", time.Now().Format("2006-01-02 15:04"), scaleName(), brokerDescription())
	fmt.Fprintf(&md, "| dimension | point | records/s | CPU µs/record | peak RSS | vs ideal |\n|---|---|---:|---:|---:|---:|\n")
	for _, d := range dims {
		for _, p := range d.points {
			fmt.Fprintf(&md, "| %s | %s | %s | %s | %s | %s |\n", d.label, p.what, thousands(p.perSec),
				orDash(p.cpuUS, "%.2f"), orDash(p.rssMiB, "%.0f MiB"), orDash(p.idealTime, "%.2f×"))
		}
		png := filepath.Join(dir, scalingName()+"-"+d.name+".png")
		if err := plotScaling(png, d); err != nil {
			b.Errorf("plotting %s: %v", png, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, scalingName()+".md"), []byte(md.String()), 0o644); err != nil {
		b.Error(err)
	}
}

// scalingName is the base name of the scaling files: "scaling", or
// "scaling-kafka-4" when TURBO_BENCH_OUT is results-kafka-4 (make
// bench-kafka), so that each broker's run keeps its own.
func scalingName() string {
	return "scaling" + strings.TrimPrefix(resultsName(), "results")
}

// plotScaling draws a dimension's three curves side by side — records per
// second, CPU µs per record, peak RSS in MiB — against x on a log axis, and
// writes them to path as a PNG. Points that did not finish are left out.
func plotScaling(path string, d scalingDim) error {
	panels := []struct {
		title string
		y     func(scalePoint) float64
	}{
		{"records/s", func(p scalePoint) float64 { return p.perSec }},
		{"CPU µs per record", func(p scalePoint) float64 { return p.cpuUS }},
		{"peak RSS (MiB)", func(p scalePoint) float64 { return p.rssMiB }},
	}
	row := make([]*plot.Plot, len(panels))
	for i, panel := range panels {
		p := plot.New()
		p.Title.Text = panel.title
		p.X.Label.Text = d.label
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		// The axis spans every point asked for, measured or not: a log
		// axis cannot start at zero.
		p.X.Min, p.X.Max = math.Inf(1), math.Inf(-1)
		for _, pt := range d.points {
			if pt.x > 0 {
				p.X.Min, p.X.Max = min(p.X.Min, pt.x/2), max(p.X.Max, pt.x*2)
			}
		}
		if math.IsInf(p.X.Min, 0) {
			p.X.Min, p.X.Max = 1, 10
		}
		p.Y.Min = 0
		var xys plotter.XYs
		for _, pt := range d.points {
			if y := panel.y(pt); pt.x > 0 && y > 0 && !math.IsInf(y, 0) {
				xys = append(xys, plotter.XY{X: pt.x, Y: y})
			}
		}
		if len(xys) > 0 {
			line, points, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			p.Add(line, points, plotter.NewGrid())
		}
		row[i] = p
	}
	const w, h = 15 * vg.Centimeter * 3, 12 * vg.Centimeter
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Centimeter, PadTop: vg.Centimeter / 2,
		PadBottom: vg.Centimeter / 2, PadLeft: vg.Centimeter / 2, PadRight: vg.Centimeter / 2}
	canvases := plot.Align([][]*plot.Plot{row}, tiles, dc)
	for i, p := range row {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// bytesLabel writes a size the way the table does: 100 B, 10 KiB, 1 MiB.
func bytesLabel(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
