package kfuse_test

import (
	"fmt"

	kfuse "github.com/kfuse/kfuse/bindings/go"
)

func Example() {
	b, _ := kfuse.NewBuilder()
	defer b.Close()
	x, _ := b.Tensor(1, kfuse.Float32)
	y, _ := b.Unary(kfuse.MustOp("relu"), x)
	_ = b.Output(y)
	f, err := b.Finalize()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()

	in, _ := kfuse.NewHostTensor([]float32{-1, 2, -3}, 3)
	defer in.Close()
	out, err := f.Execute(in)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer out[0].Close()
	values, _ := kfuse.ToSlice[float32](out[0])
	fmt.Println(values)
	// Output: [0 2 0]
}
