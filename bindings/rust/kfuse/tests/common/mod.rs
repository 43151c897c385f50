//! Shared by the integration tests: the layernorm definition, its double
//! precision reference, and a minimal CUDA driver loader.
#![allow(dead_code)]

pub mod cuda;

use kfuse::{Builder, DType, Fusion, Op, Result};

pub const EPS: f64 = 1e-5;

/// y = (x - mean) * rsqrt(var + eps) * w + b over the last dim of x.
pub fn layernorm() -> Result<Fusion> {
    let mut b = Builder::new()?;
    let x = b.tensor(2, DType::F32)?;
    let w = b.tensor(1, DType::F32)?;
    let bias = b.tensor(1, DType::F32)?;
    let (var, mean) = b.var_mean(x, &[-1], 0, true)?;
    let eps = b.constant_f64(EPS, DType::F32)?;
    let centered = b.sub(x, mean)?;
    let var_eps = b.add(var, eps)?;
    let inv_std = b.unary(Op::Rsqrt, var_eps)?;
    let normed = b.mul(centered, inv_std)?;
    let scaled = b.mul(normed, w)?;
    let y = b.add(scaled, bias)?;
    b.output(y)?;
    b.finalize()
}

/// Deterministic, irregular test data.
pub fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8) % 2000) as f32 / 250.0 - 4.0)
        .collect()
}

pub fn reference(x: &[f32], w: &[f32], b: &[f32], rows: usize, cols: usize) -> Vec<f64> {
    let mut y = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / cols as f64;
        let inv_std = 1.0 / (var + EPS).sqrt();
        for c in 0..cols {
            y.push((row[c] as f64 - mean) * inv_std * w[c] as f64 + b[c] as f64);
        }
    }
    y
}

pub fn assert_close(got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= 1e-4 + 1e-4 * w.abs(),
            "element {i}: got {g}, want {w}"
        );
    }
}

/// Resident set size of this process in KiB.
pub fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}
