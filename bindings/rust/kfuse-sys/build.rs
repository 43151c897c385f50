//! Generates the raw bindings from the current kfuse.h and links libkfuse.
//!
//! Where kfuse is found, the first that answers:
//! - `KFUSE_INCLUDE_DIR` (the directory holding `kfuse/kfuse.h`) and
//!   `KFUSE_LIB_DIR` (the directory holding `libkfuse.so`);
//! - pkg-config: `kfuse.pc` from `cmake --install` (`includedir`, `libdir`;
//!   set `PKG_CONFIG_PATH` to `<prefix>/lib/pkgconfig` for a prefix that
//!   pkg-config does not search);
//! - for the header, this crate's checkout (`../../../c_api/include`); for
//!   the library, the linker's default search path.
//!
//! `DLPACK_INCLUDE_DIR`: where `dlpack/dlpack.h` lives, if not a system
//! include directory.
//!
//! The library's directory, when known, is passed on as `DEP_KFUSE_LIB_DIR`
//! to the build scripts of crates that depend on this one, and written as an
//! rpath into this crate's own tests. Cargo gives no way to add an rpath to
//! a dependent's binaries: a program finds libkfuse at run time through its
//! own build script (`cargo:rustc-link-arg=-Wl,-rpath,$DEP_KFUSE_LIB_DIR`,
//! see docs/bindings.md), a directory the loader searches, or `LD_LIBRARY_PATH`.

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// `pkg-config --variable=NAME kfuse`, when pkg-config knows kfuse.
fn pkg_config_variable(name: &str) -> Option<PathBuf> {
    let out = Command::new(env::var_os("PKG_CONFIG").unwrap_or_else(|| "pkg-config".into()))
        .args([&format!("--variable={name}"), "kfuse"])
        .output()
        .ok()?;
    let value = String::from_utf8(out.stdout).ok()?;
    let value = value.trim();
    if out.status.success() && !value.is_empty() {
        Some(PathBuf::from(value))
    } else {
        None
    }
}

fn main() {
    for var in [
        "KFUSE_INCLUDE_DIR",
        "KFUSE_LIB_DIR",
        "DLPACK_INCLUDE_DIR",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let checkout = manifest.join("../../../c_api/include");
    let include_dir = env::var_os("KFUSE_INCLUDE_DIR")
        .map(PathBuf::from)
        .or_else(|| pkg_config_variable("includedir"))
        .or_else(|| Some(checkout).filter(|dir| dir.join("kfuse/kfuse.h").exists()))
        .unwrap_or_else(|| {
            panic!(
                "kfuse.h not found: set KFUSE_INCLUDE_DIR to the directory holding kfuse/kfuse.h, \
                 or PKG_CONFIG_PATH to the directory of an installed kfuse.pc"
            )
        });
    let header = include_dir.join("kfuse/kfuse.h");
    println!("cargo:rerun-if-changed={}", header.display());

    let lib_dir = env::var_os("KFUSE_LIB_DIR")
        .map(PathBuf::from)
        .or_else(|| pkg_config_variable("libdir"));
    if let Some(dir) = &lib_dir {
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        println!("cargo:rustc-link-search=native={}", dir.display());
        // DEP_KFUSE_LIB_DIR for dependents' build scripts; an rpath for our tests.
        println!("cargo:lib_dir={}", dir.display());
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
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
