module lwgpu.io/benchpeers

go 1.19
