//! What the `weir check` tests (`check.rs`, `stream_checks.rs`) share: the binary
//! run as a process, and the embedded components written out as files.

use std::path::Path;
use std::process::{Command, Output};

use weir_tests::gateway::{shared_cache_dir, weir_binary};

/// `weir check ARGS…`, run as a process on the shared artifact cache, its log level
/// the binary's own (so a test's `RUST_LOG` cannot change the report).
pub fn weir_check(args: &[&str]) -> Output {
    Command::new(weir_binary())
        .arg("check")
        .args(args)
        .env("WEIR_CACHE_DIR", shared_cache_dir())
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

/// An embedded component exactly as the binary embeds it, written to a file.
pub fn embedded_component(dir: &Path, name: &str) -> String {
    let bytes = weir_host::plugin::embedded_components()
        .iter()
        .find(|embedded| embedded.name == name)
        .unwrap_or_else(|| panic!("`{name}` is embedded"))
        .bytes;
    let path = dir.join(format!("{name}.wasm"));
    std::fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_owned()
}
