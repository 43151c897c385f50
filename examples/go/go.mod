module kfuse-example

go 1.19

require github.com/kfuse/kfuse/bindings/go v0.0.0

// The binding from this checkout. Its generated capi package comes from the
// build (target kfuse_go_module stages a complete module under
// build/bindings/go/module; CTest example_go points this replace there).
replace github.com/kfuse/kfuse/bindings/go => ../../bindings/go
