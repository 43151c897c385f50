"""Fusion texts shared by the package's CPU and GPU tests."""

LAYERNORM = """
input x: tensor<float32, 2>
input w: tensor<float32, 1>
input b: tensor<float32, 1>
input eps: scalar<float32>
var, mean = var_mean(x) {axes=[1], keepdim=true, correction=0}
centered = sub(x, mean)
shifted = add(var, eps)
inv_std = rsqrt(shifted)
normed = mul(centered, inv_std)
scaled = mul(normed, w)
y = add(scaled, b)
output y
"""
