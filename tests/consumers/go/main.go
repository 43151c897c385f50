// Command kfuse-consumer is a user's program outside the kfuse checkout: it
// requires the module by path (a replace directive points at the module the
// kfuse build staged) and runs relu(x + bias) on the CPU backend.
package main

import (
	"errors"
	"fmt"
	"os"
	"reflect"

	kfuse "github.com/kfuse/kfuse/bindings/go"
)

func fail(format string, args ...any) {
	fmt.Printf("FAIL: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	b, err := kfuse.NewBuilder()
	if err != nil {
		fail("%v", err)
	}
	defer b.Close()
	x, _ := b.Tensor(2, kfuse.Float32)
	bias, _ := b.Tensor(1, kfuse.Float32)
	sum, _ := b.Add(x, bias)
	y, _ := b.Unary(kfuse.MustOp("relu"), sum)
	if err := b.Output(y); err != nil {
		fail("%v", err)
	}
	f, err := b.Finalize()
	if err != nil {
		fail("%v", err)
	}
	defer f.Close()

	xt, _ := kfuse.NewHostTensor([]float32{-1, 2, -3, 4, -5, 6}, 2, 3)
	defer xt.Close()
	bt, _ := kfuse.NewHostTensor([]float32{0.5, -2.5, 4}, 3)
	defer bt.Close()
	out, err := f.Execute(xt, bt)
	if err != nil {
		fail("%v", err)
	}
	defer out[0].Close()
	got, err := kfuse.ToSlice[float32](out[0])
	if err != nil {
		fail("%v", err)
	}
	want := []float32{0, 0, 1, 4.5, 0, 10}
	fmt.Printf("relu(x + bias) = %v shape %v\n", got, out[0].Shape())
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(out[0].Shape(), []int64{2, 3}) {
		fail("expected %v shape [2 3]", want)
	}

	// A bias that does not broadcast: kfuse's status and message as a Go error.
	bad, _ := kfuse.NewHostTensor([]float32{1, 2, 3, 4}, 4)
	defer bad.Close()
	if _, err := f.Execute(xt, bad); !errors.Is(err, kfuse.ErrShapeMismatch) {
		fail("expected ErrShapeMismatch, got %v", err)
	} else {
		fmt.Println("error:", err)
	}
	fmt.Println("consumer: OK")
}
