//! An rpath to libkfuse where kfuse-sys found it (KFUSE_LIB_DIR or
//! pkg-config), so the program runs without LD_LIBRARY_PATH.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_KFUSE_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_KFUSE_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
