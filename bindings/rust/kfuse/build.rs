//! An rpath to libkfuse for this crate's tests and examples, from where
//! kfuse-sys found it (`DEP_KFUSE_LIB_DIR`): they run without
//! `LD_LIBRARY_PATH`. (Cargo passes link arguments only to the package whose
//! build script prints them; a program using kfuse adds its own, see
//! docs/bindings.md.)
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_KFUSE_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_KFUSE_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
