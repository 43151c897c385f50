//! Many define/execute/fail cycles keep memory bounded: every handle,
//! output and error is released. Its own test binary, so that no other test
//! runs in the process while RSS is measured.

mod common;

use common::{data, layernorm, rss_kib};
use kfuse::{Fusion, TensorRef};

fn cycle(x: &[f32], w: &[f32]) {
    let fusion = layernorm().unwrap();
    let xt = TensorRef::from_slice(x, &[16, 64]).unwrap();
    let wt = TensorRef::from_slice(w, &[64]).unwrap();
    let out = fusion.execute(&[&xt, &wt, &wt]).unwrap();
    assert_eq!(out[0].len(), 16 * 64);
    let copy = fusion.clone();
    assert!(copy.execute(&[&xt]).is_err());
    assert!(Fusion::from_text("y = nope(").is_err());
}

#[test]
fn repeated_cycles_do_not_grow_memory() {
    let (x, w) = (data(16 * 64, 1), data(64, 2));
    for _ in 0..2000 {
        cycle(&x, &w);
    }
    let before = rss_kib();
    for _ in 0..20000 {
        cycle(&x, &w);
    }
    let grown = rss_kib().saturating_sub(before);
    // A leaked 16x64 output alone would be 80 MB over 20000 cycles.
    assert!(grown < 8 * 1024, "RSS grew by {grown} KiB over 20000 cycles");
}
