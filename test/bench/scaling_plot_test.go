package bench

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// plotScaling writes a decodable PNG with three panels' worth of ink, and
// leaves out what did not finish rather than failing.
func TestPlotScalingWritesAPNG(t *testing.T) {
	dir := t.TempDir()
	ink := func(d scalingDim) int {
		t.Helper()
		path := filepath.Join(dir, d.name+".png")
		if err := plotScaling(path, d); err != nil {
			t.Fatalf("plotScaling: %v", err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		img, err := png.Decode(f)
		if err != nil {
			t.Fatalf("%s is not a PNG: %v", path, err)
		}
		if b := img.Bounds(); b.Dx() < 1000 || b.Dy() < 300 {
			t.Fatalf("%s is %dx%d, want three panels side by side", path, b.Dx(), b.Dy())
		}
		dark := 0
		b := img.Bounds()
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				if r, g, bl, _ := img.At(x, y).RGBA(); r+g+bl < 3*0x8000 {
					dark++
				}
			}
		}
		return dark
	}
	full := ink(scalingDim{name: "keys", label: "distinct keys", points: []scalePoint{
		{x: 10, perSec: 900_000, cpuUS: 1.3, rssMiB: 70},
		{x: 10_000, perSec: 850_000, cpuUS: 1.4, rssMiB: 72},
		{x: 1_000_000, perSec: 700_000, cpuUS: 1.7, rssMiB: 80},
	}})
	empty := ink(scalingDim{name: "none", label: "distinct keys", points: []scalePoint{{x: 10}, {x: 100}}})
	if full <= empty {
		t.Errorf("three measured points drew %d dark pixels, no finished point %d: the curves are missing", full, empty)
	}
}
