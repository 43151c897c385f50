module kfuse-example

go 1.19

require kfuse v0.0.0

// The binding lives in this repository (its generated capi package comes
// from the build, see docs/bindings.md).
replace kfuse => ../../bindings/go
