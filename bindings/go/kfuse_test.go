package kfuse_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"

	kfuse "github.com/kfuse/kfuse/bindings/go"
	"github.com/kfuse/kfuse/bindings/go/internal/cudatest"
)

const eps = 1e-5

// layerNorm defines y = (x - mean) * rsqrt(var + eps) * w + b over the last dim.
func layerNorm(t testing.TB) *kfuse.Fusion {
	t.Helper()
	b, err := kfuse.NewBuilder()
	must(t, err)
	defer b.Close()
	x, err := b.Tensor(2, kfuse.Float32)
	must(t, err)
	w, err := b.Tensor(1, kfuse.Float32)
	must(t, err)
	bias, err := b.Tensor(1, kfuse.Float32)
	must(t, err)
	variance, mean, err := b.VarMean(x, []int64{-1}, 0, true)
	must(t, err)
	e, err := b.ConstantFloat(eps, kfuse.Float32)
	must(t, err)
	centered, err := b.Sub(x, mean)
	must(t, err)
	ve, err := b.Add(variance, e)
	must(t, err)
	inv, err := b.Unary(kfuse.MustOp("rsqrt"), ve)
	must(t, err)
	normed, err := b.Mul(centered, inv)
	must(t, err)
	scaled, err := b.Mul(normed, w)
	must(t, err)
	y, err := b.Add(scaled, bias)
	must(t, err)
	must(t, b.Output(y))
	f, err := b.Finalize()
	must(t, err)
	return f
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func data(n int, seed uint32) []float32 {
	out := make([]float32, n)
	for i := range out {
		h := uint32(i)*2654435761 + seed
		out[i] = float32((h>>8)%2000)/250 - 4
	}
	return out
}

func reference(x, w, b []float32, rows, cols int) []float64 {
	y := make([]float64, rows*cols)
	for r := 0; r < rows; r++ {
		row := x[r*cols : (r+1)*cols]
		var mean, variance float64
		for _, v := range row {
			mean += float64(v)
		}
		mean /= float64(cols)
		for _, v := range row {
			variance += (float64(v) - mean) * (float64(v) - mean)
		}
		variance /= float64(cols)
		inv := 1 / math.Sqrt(variance+eps)
		for c, v := range row {
			y[r*cols+c] = (float64(v)-mean)*inv*float64(w[c]) + float64(b[c])
		}
	}
	return y
}

func assertClose(t *testing.T, got []float32, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d values, want %d", len(got), len(want))
	}
	for i := range got {
		if math.Abs(float64(got[i])-want[i]) > 1e-4+1e-4*math.Abs(want[i]) {
			t.Fatalf("element %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

func host(t testing.TB, values []float32, shape ...int64) *kfuse.HostTensor {
	t.Helper()
	h, err := kfuse.NewHostTensor(values, shape...)
	must(t, err)
	return h
}

func TestLayerNormOnCPU(t *testing.T) {
	rows, cols := 5, 33
	x, w, b := data(rows*cols, 1), data(cols, 2), data(cols, 3)
	f := layerNorm(t)
	defer f.Close()
	xt, wt, bt := host(t, x, int64(rows), int64(cols)), host(t, w, int64(cols)), host(t, b, int64(cols))
	defer xt.Close()
	defer wt.Close()
	defer bt.Close()
	out, err := f.Execute(xt, wt, bt)
	must(t, err)
	defer out[0].Close()
	if got := fmt.Sprint(out[0].Shape()); got != fmt.Sprint([]int64{int64(rows), int64(cols)}) {
		t.Fatalf("shape %s", got)
	}
	if out[0].DType() != kfuse.Float32 || out[0].Device().Type != kfuse.CPU {
		t.Fatalf("dtype %v device %v", out[0].DType(), out[0].Device())
	}
	y, err := kfuse.ToSlice[float32](out[0])
	must(t, err)
	assertClose(t, y, reference(x, w, b, rows, cols))
	if _, err := kfuse.ToSlice[int64](out[0]); !errors.Is(err, kfuse.ErrDTypeMismatch) {
		t.Fatalf("ToSlice[int64]: %v", err)
	}
}

func TestExecuteIntoAndMetadata(t *testing.T) {
	rows, cols := 3, 8
	x, w, b := data(rows*cols, 4), data(cols, 5), data(cols, 6)
	f := layerNorm(t)
	defer f.Close()
	g := layerNorm(t)
	defer g.Close()
	if !f.Same(g) {
		t.Fatal("the same definition gave different fusions")
	}
	text, err := f.Text()
	must(t, err)
	parsed, err := kfuse.FusionFromText(text)
	must(t, err)
	defer parsed.Close()
	if !parsed.Same(f) || !strings.Contains(text, "var_mean") {
		t.Fatalf("text round trip failed:\n%s", text)
	}
	inputs, err := f.Inputs()
	must(t, err)
	if len(inputs) != 3 || inputs[0] != (kfuse.ValueInfo{ID: 0, Rank: 2, DType: kfuse.Float32}) {
		t.Fatalf("inputs %+v", inputs)
	}
	xt, wt, bt := host(t, x, int64(rows), int64(cols)), host(t, w, int64(cols)), host(t, b, int64(cols))
	defer xt.Close()
	defer wt.Close()
	defer bt.Close()
	shape, err := f.OutputShape(0, xt, wt, bt)
	must(t, err)
	yt := host(t, make([]float32, rows*cols), shape...)
	defer yt.Close()
	must(t, f.ExecuteInto([]kfuse.DLPackTensor{xt, wt, bt}, []kfuse.DLPackTensor{yt}))
	// Read yt back through a fusion that copies it: y = neg(neg(y)).
	copyFusion, err := kfuse.FusionFromText("input y: tensor<float32, 2>\na = neg(y)\nb = neg(a)\noutput b\n")
	must(t, err)
	defer copyFusion.Close()
	out, err := copyFusion.Execute(yt)
	must(t, err)
	defer out[0].Close()
	y, err := kfuse.ToSlice[float32](out[0])
	must(t, err)
	assertClose(t, y, reference(x, w, b, rows, cols))
	if kfuse.Version() != 1 || kfuse.MustOp("var_mean").NumOutputs() != 2 || kfuse.Float32.String() != "float32" {
		t.Fatal("metadata from the header disagrees")
	}
}

func TestErrorsCarryStatusAndMessage(t *testing.T) {
	f := layerNorm(t)
	defer f.Close()
	flat, w := host(t, data(12, 1), 12), host(t, data(4, 2), 4)
	defer flat.Close()
	defer w.Close()
	_, err := f.Execute(flat, w, w)
	var kerr *kfuse.Error
	if !errors.As(err, &kerr) || kerr.Status != kfuse.StatusShapeMismatch || !strings.Contains(kerr.Message, "rank") {
		t.Fatalf("got %v", err)
	}
	if !errors.Is(err, kfuse.ErrShapeMismatch) || errors.Is(err, kfuse.ErrParse) {
		t.Fatalf("errors.Is: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "KF_ERR_SHAPE_MISMATCH: ") {
		t.Fatalf("Error(): %q", err.Error())
	}
	_, err = kfuse.FusionFromText("input x: tensor<float32, 1>\ny = nope(x)\n")
	if !errors.Is(err, kfuse.ErrParse) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("parse: %v", err)
	}
	b, err := kfuse.NewBuilder()
	must(t, err)
	x, err := b.Tensor(1, kfuse.Float32)
	must(t, err)
	if _, err := b.Binary(kfuse.MustOp("shift_left"), x, x); !errors.Is(err, kfuse.ErrDTypeMismatch) {
		t.Fatalf("shift_left on float: %v", err)
	}
	if _, err := b.Unary(kfuse.MustOp("neg"), 42); !errors.Is(err, kfuse.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "42") {
		t.Fatalf("unknown id: %v", err)
	}
	must(t, b.Close())
	must(t, b.Close())
	if _, err := b.Tensor(1, kfuse.Float32); err == nil {
		t.Fatal("use after Close succeeded")
	}
	must(t, f.Close())
	must(t, f.Close())
	if _, err := f.Text(); err == nil {
		t.Fatal("use after Close succeeded")
	}
}

// Many goroutines fail at once, each with a message naming its own size:
// a message read outside the failing native call would sometimes belong to
// another goroutine.
func TestConcurrentErrorsKeepTheirOwnMessage(t *testing.T) {
	f := layerNorm(t)
	defer f.Close()
	const goroutines, calls = 16, 500
	var wg sync.WaitGroup
	failures := make(chan string, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			cols := int64(4 + g)
			x := host(t, data(int(3*cols), uint32(g)), 3, cols)
			defer x.Close()
			bad := host(t, data(int(cols+100), 0), cols+100)
			defer bad.Close()
			want := strconv.FormatInt(cols+100, 10)
			for i := 0; i < calls; i++ {
				_, err := f.Execute(x, bad, bad)
				var kerr *kfuse.Error
				if !errors.As(err, &kerr) || !strings.Contains(kerr.Message, want) {
					failures <- fmt.Sprintf("goroutine %d call %d: want a message with %s, got %v", g, i, want, err)
					return
				}
				runtime.Gosched()
			}
		}(g)
	}
	wg.Wait()
	close(failures)
	for msg := range failures {
		t.Error(msg)
	}
}

func TestLayerNormOnGPU(t *testing.T) {
	if !cudatest.Present() {
		t.Skip("no CUDA driver (libcuda.so.1)")
	}
	rows, cols := 64, 129
	x, w, b := data(rows*cols, 7), data(cols, 8), data(cols, 9)
	dx, dw, db := cudatest.Upload(x), cudatest.Upload(w), cudatest.Upload(b)
	defer cudatest.Free(dx)
	defer cudatest.Free(dw)
	defer cudatest.Free(db)
	dev := kfuse.Device{Type: kfuse.CUDA, ID: 0}
	xt, err := kfuse.NewRawTensor(dx, dev, kfuse.Float32, []int64{int64(rows), int64(cols)}, nil)
	must(t, err)
	defer xt.Close()
	wt, err := kfuse.NewRawTensor(dw, dev, kfuse.Float32, []int64{int64(cols)}, nil)
	must(t, err)
	defer wt.Close()
	bt, err := kfuse.NewRawTensor(db, dev, kfuse.Float32, []int64{int64(cols)}, nil)
	must(t, err)
	defer bt.Close()
	f := layerNorm(t)
	defer f.Close()
	out, err := f.Execute(xt, wt, bt)
	if errors.Is(err, kfuse.ErrNoDevice) || errors.Is(err, kfuse.ErrUnsupported) {
		t.Skip(err)
	}
	must(t, err)
	defer out[0].Close()
	if out[0].Device() != dev || fmt.Sprint(out[0].Strides()) != fmt.Sprint([]int64{int64(cols), 1}) {
		t.Fatalf("device %v strides %v", out[0].Device(), out[0].Strides())
	}
	y, ok := cudatest.Download(out[0].DataPointer(), rows*cols)
	if !ok {
		t.Fatal("cuMemcpyDtoH failed")
	}
	assertClose(t, y, reference(x, w, b, rows, cols))
}

func rssKiB(t *testing.T) int64 {
	status, err := os.ReadFile("/proc/self/status")
	must(t, err)
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			n, err := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			must(t, err)
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// Many define/execute/fail cycles keep memory bounded.
func TestRepeatedCyclesDoNotLeak(t *testing.T) {
	x, w := host(t, data(16*64, 1), 16, 64), host(t, data(64, 2), 64)
	defer x.Close()
	defer w.Close()
	cycle := func() {
		f := layerNorm(t)
		out, err := f.Execute(x, w, w)
		must(t, err)
		out[0].Close()
		if _, err := f.Execute(x); err == nil {
			t.Fatal("missing inputs accepted")
		}
		f.Close()
		if _, err := kfuse.FusionFromText("y = nope("); err == nil {
			t.Fatal("bad text accepted")
		}
	}
	for i := 0; i < 2000; i++ {
		cycle()
	}
	runtime.GC()
	debug.FreeOSMemory()
	before := rssKiB(t)
	for i := 0; i < 20000; i++ {
		cycle()
	}
	runtime.GC()
	debug.FreeOSMemory()
	// A leaked 16x64 output alone would be 80 MB over 20000 cycles.
	if grown := rssKiB(t) - before; grown > 16*1024 {
		t.Fatalf("RSS grew by %d KiB over 20000 cycles", grown)
	}
}

// Size reads an extent per call: y = x * size(x, 0).
func TestSizeIsReadPerCall(t *testing.T) {
	b, err := kfuse.NewBuilder()
	must(t, err)
	defer b.Close()
	x, err := b.Tensor(2, kfuse.Float32)
	must(t, err)
	n, err := b.Size(x, 0)
	must(t, err)
	y, err := b.Mul(x, n)
	must(t, err)
	must(t, b.Output(y))
	f, err := b.Finalize()
	must(t, err)
	defer f.Close()
	for _, rows := range []int{2, 5} {
		v := data(rows*3, 7)
		xt := host(t, v, int64(rows), 3)
		out, err := f.Execute(xt)
		must(t, err)
		got, err := kfuse.ToSlice[float32](out[0])
		must(t, err)
		for i := range v {
			if got[i] != v[i]*float32(rows) {
				t.Fatalf("rows %d: y[%d] = %v, expected %v", rows, i, got[i], v[i]*float32(rows))
			}
		}
		out[0].Close()
		xt.Close()
	}
}
