//! A user's program: relu(x + bias) on the CPU backend, checked, and a shape
//! error that carries kfuse's status and message.
use kfuse::{Builder, DType, Op, TensorRef};

fn main() -> Result<(), kfuse::Error> {
    let mut b = Builder::new()?;
    let x = b.tensor(2, DType::F32)?;
    let bias = b.tensor(1, DType::F32)?;
    let sum = b.add(x, bias)?;
    let y = b.unary(Op::Relu, sum)?;
    b.output(y)?;
    let fusion = b.finalize()?;

    let xs = [-1.0f32, 2.0, -3.0, 4.0, -5.0, 6.0];
    let bs = [0.5f32, -2.5, 4.0];
    let xt = TensorRef::from_slice(&xs, &[2, 3])?;
    let out = fusion.execute(&[&xt, &TensorRef::from_slice(&bs, &[3])?])?;
    let got = out[0].to_vec::<f32>()?;
    println!("relu(x + bias) = {:?} shape {:?}", got, out[0].shape());
    if got != [0.0, 0.0, 1.0, 4.5, 0.0, 10.0] || out[0].shape() != [2, 3] {
        println!("FAIL: expected [0.0, 0.0, 1.0, 4.5, 0.0, 10.0] shape [2, 3]");
        std::process::exit(1);
    }

    let bad = [1.0f32, 2.0, 3.0, 4.0];
    match fusion.execute(&[&xt, &TensorRef::from_slice(&bad, &[4])?]) {
        Err(e) if e.status() == kfuse::Status::ShapeMismatch => println!("error: {e}"),
        other => {
            println!("FAIL: expected KF_ERR_SHAPE_MISMATCH, got {:?}", other.map(|v| v.len()));
            std::process::exit(1);
        }
    }
    println!("consumer: OK");
    Ok(())
}
