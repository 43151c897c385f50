//! The layernorm fusion on the CPU backend and, where a GPU is present, on
//! CUDA; error paths; the definition cache; threads.

mod common;

use common::{assert_close, data, layernorm, reference};
use kfuse::{Builder, DType, Device, Fusion, Op, Status, TensorRef};

#[test]
fn layernorm_matches_reference_on_cpu() {
    let (rows, cols) = (5, 33);
    let (x, w, b) = (data(rows * cols, 1), data(cols, 2), data(cols, 3));
    let fusion = layernorm().unwrap();
    let xt = TensorRef::from_slice(&x, &[rows as i64, cols as i64]).unwrap();
    let wt = TensorRef::from_slice(&w, &[cols as i64]).unwrap();
    let bt = TensorRef::from_slice(&b, &[cols as i64]).unwrap();
    let out = fusion.execute(&[&xt, &wt, &bt]).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].shape(), &[rows as i64, cols as i64]);
    assert_eq!(out[0].dtype(), Some(DType::F32));
    assert_eq!(out[0].device(), Device::Cpu);
    assert_close(&out[0].to_vec::<f32>().unwrap(), &reference(&x, &w, &b, rows, cols));
}

#[test]
fn execute_into_and_host_convenience_agree() {
    let (rows, cols) = (3, 8);
    let (x, w, b) = (data(rows * cols, 4), data(cols, 5), data(cols, 6));
    let fusion = layernorm().unwrap();
    let shape = [rows as i64, cols as i64];
    let xt = TensorRef::from_slice(&x, &shape).unwrap();
    let wt = TensorRef::from_slice(&w, &[cols as i64]).unwrap();
    let bt = TensorRef::from_slice(&b, &[cols as i64]).unwrap();
    assert_eq!(fusion.output_shape(&[&xt, &wt, &bt], 0).unwrap(), shape.to_vec());

    let mut y = vec![0.0f32; rows * cols];
    let mut yt = TensorRef::from_mut_slice(&mut y, &shape).unwrap();
    fusion.execute_into(&[&xt, &wt, &bt], &mut [&mut yt]).unwrap();
    drop(yt);
    let want = reference(&x, &w, &b, rows, cols);
    assert_close(&y, &want);

    let out = fusion
        .execute_host::<f32>(&[(&x, &shape), (&w, &[cols as i64]), (&b, &[cols as i64])])
        .unwrap();
    assert_eq!(out[0].1, shape.to_vec());
    assert_close(&out[0].0, &want);
}

#[test]
fn same_definition_gives_same_fusion_and_text_round_trips() {
    let a = layernorm().unwrap();
    let b = layernorm().unwrap();
    assert_eq!(a, b);
    let text = a.to_text().unwrap();
    assert!(text.contains("var_mean"), "{text}");
    assert_eq!(Fusion::from_text(&text).unwrap(), a);
    let inputs = a.inputs().unwrap();
    assert_eq!(inputs.len(), 3);
    assert_eq!(
        (inputs[0].rank, inputs[0].dtype, inputs[0].is_scalar),
        (2, DType::F32, false)
    );
    assert_eq!(a.outputs().unwrap()[0].rank, 2);
    assert!(kfuse::cache::stats().unwrap().hits >= 1);
}

#[test]
fn ops_come_from_the_header() {
    assert_eq!(Op::GeluTanh.name(), "gelu_tanh");
    assert_eq!(Op::from_name("var_mean"), Some(Op::VarMean));
    assert_eq!(Op::VarMean.num_outputs(), 2);
    assert_eq!(DType::BF16.name(), "bfloat16");
    assert_eq!(kfuse::version(), kfuse::sys::KF_API_VERSION as u32);
}

#[test]
fn wrong_rank_is_a_shape_mismatch_with_kfuse_message() {
    let fusion = layernorm().unwrap();
    let x = data(12, 1);
    let xt = TensorRef::from_slice(&x, &[12]).unwrap();
    let wt = TensorRef::from_slice(&x[..4], &[4]).unwrap();
    let err = fusion.execute(&[&xt, &wt, &wt]).unwrap_err();
    assert_eq!(err.status(), Status::ShapeMismatch);
    assert!(err.message().contains("rank"), "{}", err.message());
    assert!(err.to_string().starts_with("KF_ERR_SHAPE_MISMATCH: "), "{err}");
}

#[test]
fn builder_and_parser_errors() {
    // A value of another builder (id 3) does not exist in this one.
    let mut other = Builder::new().unwrap();
    let mut foreign = other.tensor(1, DType::F32).unwrap();
    for _ in 0..3 {
        foreign = other.unary(Op::Neg, foreign).unwrap();
    }
    let mut b = Builder::new().unwrap();
    let err = b.unary(Op::Neg, foreign).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains('3'), "{}", err.message());

    let x = b.tensor(1, DType::F32).unwrap();
    let err = b.binary(Op::ShiftLeft, x, x).unwrap_err();
    assert_eq!(err.status(), Status::DtypeMismatch, "{err}");

    let err = Fusion::from_text("input x: tensor<float32, 1>\ny = nope(x)\n").unwrap_err();
    assert_eq!(err.status(), Status::Parse);
    assert!(err.message().contains("line 2"), "{}", err.message());

    let err = TensorRef::from_slice(&[1.0f32; 3], &[2, 2]).err().unwrap();
    assert_eq!(err.status(), Status::ShapeMismatch);
}

#[test]
fn fusions_are_shared_by_threads_and_errors_stay_per_thread() {
    let fusion = layernorm().unwrap();
    std::thread::scope(|s| {
        for t in 0..8i64 {
            let fusion = &fusion;
            s.spawn(move || {
                for i in 0..200 {
                    let cols = 4 + (t + i) % 5;
                    let x = data((3 * cols) as usize, t as u32);
                    let xt = TensorRef::from_slice(&x, &[3, cols]).unwrap();
                    // w has a size that cannot broadcast: the message names it.
                    let bad = data((cols + 1) as usize, 0);
                    let wt = TensorRef::from_slice(&bad, &[cols + 1]).unwrap();
                    let err = fusion.execute(&[&xt, &wt, &wt]).unwrap_err();
                    assert!(err.message().contains(&(cols + 1).to_string()), "{}", err.message());
                    let good = data(cols as usize, 1);
                    let gt = TensorRef::from_slice(&good, &[cols]).unwrap();
                    fusion.execute(&[&xt, &gt, &gt]).unwrap();
                }
            });
        }
    });
}

#[test]
fn layernorm_on_gpu_when_present() {
    let cuda = match common::cuda::Cuda::load() {
        Some(cuda) => cuda,
        None => {
            eprintln!("skipped: no CUDA driver (libcuda.so.1)");
            return;
        }
    };
    let (rows, cols) = (64usize, 129usize);
    let (x, w, b) = (data(rows * cols, 7), data(cols, 8), data(cols, 9));
    let (dx, dw, db) = (cuda.upload(&x), cuda.upload(&w), cuda.upload(&b));
    let fusion = layernorm().unwrap();
    // SAFETY: the device buffers hold the shapes' elements and outlive the views.
    let (xt, wt, bt) = unsafe {
        (
            TensorRef::from_raw_parts(dx as _, Device::Cuda(0), DType::F32, &[rows as i64, cols as i64], None),
            TensorRef::from_raw_parts(dw as _, Device::Cuda(0), DType::F32, &[cols as i64], None),
            TensorRef::from_raw_parts(db as _, Device::Cuda(0), DType::F32, &[cols as i64], None),
        )
    };
    match fusion.execute(&[&xt, &wt, &bt]) {
        Err(e) if matches!(e.status(), Status::NoDevice | Status::Unsupported) => {
            eprintln!("skipped: {e}");
        }
        Err(e) => panic!("{e}"),
        Ok(out) => {
            assert_eq!(out[0].device(), Device::Cuda(0));
            assert_eq!(out[0].shape(), &[rows as i64, cols as i64]);
            let strides = out[0].strides().map(<[i64]>::to_vec);
            assert!(
                strides.is_none() || strides == Some(vec![cols as i64, 1]),
                "{strides:?}"
            );
            let y: Vec<f32> = cuda.download(out[0].data_ptr() as u64, rows * cols);
            assert_close(&y, &reference(&x, &w, &b, rows, cols));
        }
    }
    for p in [dx, dw, db] {
        cuda.free(p);
    }
}

#[test]
fn size_is_read_per_call() {
    let mut b = Builder::new().unwrap();
    let x = b.tensor(2, DType::F32).unwrap();
    let n = b.size(x, 0).unwrap();
    let y = b.mul(x, n).unwrap();
    b.output(y).unwrap();
    let fusion = b.finalize().unwrap();
    for rows in [2usize, 5] {
        let v = data(rows * 3, 7);
        let xt = TensorRef::from_slice(&v, &[rows as i64, 3]).unwrap();
        let out = fusion.execute(&[&xt]).unwrap();
        let got = out[0].to_vec::<f32>().unwrap();
        for (g, x) in got.iter().zip(&v) {
            assert_eq!(*g, x * rows as f32);
        }
    }
}
