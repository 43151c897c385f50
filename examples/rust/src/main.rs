//! Layer normalization with kfuse from Rust: define the fusion once, run it
//! on host data, print a row and its check against a naive computation.

use kfuse::{Builder, DType, Op, TensorRef};

fn main() -> Result<(), kfuse::Error> {
    let (rows, cols) = (4usize, 8usize);
    let eps = 1e-5;

    let mut b = Builder::new()?;
    let x = b.tensor(2, DType::F32)?;
    let w = b.tensor(1, DType::F32)?;
    let bias = b.tensor(1, DType::F32)?;
    let (var, mean) = b.var_mean(x, &[-1], 0, true)?;
    let eps_value = b.constant_f64(eps, DType::F32)?;
    let centered = b.sub(x, mean)?;
    let var_eps = b.add(var, eps_value)?;
    let inv_std = b.unary(Op::Rsqrt, var_eps)?;
    let normed = b.mul(centered, inv_std)?;
    let scaled = b.mul(normed, w)?;
    let y = b.add(scaled, bias)?;
    b.output(y)?;
    let fusion = b.finalize()?;
    print!("{}", fusion.to_text()?);

    let xs: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7) % 11) as f32 - 5.0)
        .collect();
    let ws = vec![1.5f32; cols];
    let bs = vec![0.25f32; cols];
    let out = fusion.execute(&[
        &TensorRef::from_slice(&xs, &[rows as i64, cols as i64])?,
        &TensorRef::from_slice(&ws, &[cols as i64])?,
        &TensorRef::from_slice(&bs, &[cols as i64])?,
    ])?;
    let ys = out[0].to_vec::<f32>()?;

    let mut worst = 0.0f64;
    for r in 0..rows {
        let row = &xs[r * cols..(r + 1) * cols];
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / cols as f64;
        for c in 0..cols {
            let want = (row[c] as f64 - mean) / (var + eps).sqrt() * ws[c] as f64 + bs[c] as f64;
            worst = worst.max((ys[r * cols + c] as f64 - want).abs());
        }
    }
    println!("row 0: {:?}", &ys[..cols]);
    println!("max abs error vs f64 reference: {worst:.2e}");
    if worst > 1e-4 {
        eprintln!("error too large");
        std::process::exit(1);
    }
    Ok(())
}
