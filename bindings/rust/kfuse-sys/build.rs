//! Generates the raw bindings from the current kfuse.h and links libkfuse.
//!
//! Environment (CMake sets both; the defaults suit a checkout):
//! - `KFUSE_INCLUDE_DIR`: the directory holding `kfuse/kfuse.h`
//!   (default: `c_api/include` of this repository).
//! - `KFUSE_LIB_DIR`: the directory holding `libkfuse.so` (default: the
//!   linker's search path).
//! - `DLPACK_INCLUDE_DIR`: where `dlpack/dlpack.h` lives, if not a system
//!   include directory.

use std::env;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let include_dir = env::var_os("KFUSE_INCLUDE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("../../../c_api/include"));
    let header = include_dir.join("kfuse/kfuse.h");
    for var in ["KFUSE_INCLUDE_DIR", "KFUSE_LIB_DIR", "DLPACK_INCLUDE_DIR"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed={}", header.display());

    if let Some(lib_dir) = env::var_os("KFUSE_LIB_DIR") {
        println!("cargo:rustc-link-search=native={}", PathBuf::from(lib_dir).display());
    }
    println!("cargo:rustc-link-lib=dylib=kfuse");
    // Lets dependents' build scripts find the header (DEP_KFUSE_INCLUDE).
    println!("cargo:include={}", include_dir.display());

    let mut builder = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .clang_arg(format!("-I{}", include_dir.display()))
        .allowlist_function("kf_.*")
        .allowlist_type("kf_.*|DL.*")
        .allowlist_var("KF_.*")
        // Newtype enums: a value the library adds later is still a valid
        // Rust value (a Rust `enum` holding it would be undefined behavior).
        .default_enum_style(bindgen::EnumVariation::NewType { is_bitfield: false })
        .default_macro_constant_type(bindgen::MacroTypeVariation::Signed)
        .size_t_is_usize(true)
        .derive_default(true)
        .layout_tests(false);
    if let Some(dir) = env::var_os("DLPACK_INCLUDE_DIR") {
        builder = builder.clang_arg(format!("-I{}", PathBuf::from(dir).display()));
    }
    let bindings = builder.generate().expect("bindgen failed on kfuse.h");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("cannot write bindings.rs");

    std::fs::write(
        out.join("ops.rs"),
        op_list_macro(&std::fs::read_to_string(&header).unwrap()),
    )
    .expect("cannot write ops.rs");
}

/// Reads the `kf_op` enum of the header and writes a macro that hands every
/// op, as `(CamelName, KF_OP_NAME)`, to a callback macro. The safe crate
/// builds its `Op` enum with it, so a new op in the header needs no edit there.
fn op_list_macro(header: &str) -> String {
    let start = header
        .find("typedef enum kf_op {")
        .expect("kf_op enum not found in kfuse.h");
    let body = &header[start..];
    let body = &body[..body.find("} kf_op;").expect("end of kf_op enum not found")];
    let mut items = String::new();
    for line in body.lines() {
        let code = line.split("/*").next().unwrap();
        for token in code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            let name = match token.strip_prefix("KF_OP_") {
                Some(name) if name != "COUNT" && name != "MAX_ENUM" => name,
                _ => continue,
            };
            let camel: String = name
                .split('_')
                .map(|part| {
                    let lower = part.to_ascii_lowercase();
                    let mut chars = lower.chars();
                    chars
                        .next()
                        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                        .unwrap_or_default()
                })
                .collect();
            items.push_str(&format!("            ({camel}, {token}),\n"));
        }
    }
    format!(
        "/// Calls `$callback! {{ (CamelName, KF_OP_NAME), ... }}` with every op of kfuse.h.\n\
         #[macro_export]\n\
         macro_rules! kf_for_each_op {{\n    ($callback:ident) => {{\n        $callback! {{\n{items}        }}\n    }};\n}}\n"
    )
}
