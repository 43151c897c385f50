// Command layernorm runs layer normalization with kfuse from Go: define the
// fusion once, run it on host data, check it against a naive computation.
package main

import (
	"fmt"
	"log"
	"math"

	kfuse "github.com/kfuse/kfuse/bindings/go"
)

func main() {
	const rows, cols, eps = 4, 8, 1e-5
	fusion, err := layerNorm(eps)
	if err != nil {
		log.Fatal(err)
	}
	defer fusion.Close()
	text, err := fusion.Text()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(text)

	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32((i*7)%11) - 5
	}
	w, b := make([]float32, cols), make([]float32, cols)
	for i := range w {
		w[i], b[i] = 1.5, 0.25
	}
	xt, _ := kfuse.NewHostTensor(x, rows, cols)
	defer xt.Close()
	wt, _ := kfuse.NewHostTensor(w, cols)
	defer wt.Close()
	bt, _ := kfuse.NewHostTensor(b, cols)
	defer bt.Close()
	out, err := fusion.Execute(xt, wt, bt)
	if err != nil {
		log.Fatal(err)
	}
	defer out[0].Close()
	y, err := kfuse.ToSlice[float32](out[0])
	if err != nil {
		log.Fatal(err)
	}

	worst := 0.0
	for r := 0; r < rows; r++ {
		row := x[r*cols : (r+1)*cols]
		var mean, variance float64
		for _, v := range row {
			mean += float64(v) / cols
		}
		for _, v := range row {
			variance += (float64(v) - mean) * (float64(v) - mean) / cols
		}
		for c, v := range row {
			want := (float64(v)-mean)/math.Sqrt(variance+eps)*float64(w[c]) + float64(b[c])
			worst = math.Max(worst, math.Abs(float64(y[r*cols+c])-want))
		}
	}
	fmt.Println("row 0:", y[:cols])
	fmt.Printf("max abs error vs f64 reference: %.2e\n", worst)
	if worst > 1e-4 {
		log.Fatal("error too large")
	}
}

func layerNorm(eps float64) (*kfuse.Fusion, error) {
	b, err := kfuse.NewBuilder()
	if err != nil {
		return nil, err
	}
	defer b.Close()
	// Each step records one op; the first error stops the chain.
	var firstErr error
	step := func(v kfuse.Value, err error) kfuse.Value {
		if firstErr == nil {
			firstErr = err
		}
		return v
	}
	x := step(b.Tensor(2, kfuse.Float32))
	w := step(b.Tensor(1, kfuse.Float32))
	bias := step(b.Tensor(1, kfuse.Float32))
	variance, mean, err := b.VarMean(x, []int64{-1}, 0, true)
	step(0, err)
	e := step(b.ConstantFloat(eps, kfuse.Float32))
	inv := step(b.Unary(kfuse.MustOp("rsqrt"), step(b.Add(variance, e))))
	normed := step(b.Mul(step(b.Sub(x, mean)), inv))
	y := step(b.Add(step(b.Mul(normed, w)), bias))
	if firstErr != nil {
		return nil, firstErr
	}
	if err := b.Output(y); err != nil {
		return nil, err
	}
	return b.Finalize()
}
