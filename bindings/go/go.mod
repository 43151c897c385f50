module github.com/kfuse/kfuse/bindings/go

go 1.19
