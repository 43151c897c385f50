module example.com/kfuse-consumer

go 1.19

require github.com/kfuse/kfuse/bindings/go v0.0.0

// The staged module of a kfuse build (target kfuse_go_module); CTest
// consumer_go rewrites this path with `go mod edit -replace`.
replace github.com/kfuse/kfuse/bindings/go => ../kfuse/build/bindings/go/module
