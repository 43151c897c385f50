module kfuse

go 1.19
