//! The Python provider's codec (`providers/hermes-py/hermes`), tested natively by its
//! own `unittest` suite (`providers/hermes-py/tests`) under plain CPython: markup
//! parsing, encoding, decoding, classification and the stream decoder, without
//! componentize-py. The component built from it is tested in `python_provider.rs`.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::Command;

#[test]
fn the_hermes_codec_unit_tests_pass() {
    let provider = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../providers/hermes-py");
    let python = std::env::var_os("WEIR_PYTHON").unwrap_or_else(|| "python3".into());
    let output = Command::new(&python)
        .current_dir(&provider)
        .args(["-m", "unittest", "discover", "--start-directory", "tests", "--top-level-directory", "."])
        // No `__pycache__` next to the sources: the build script watches them.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run python3 -m unittest");
    let report = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the hermes-py unit tests failed:\n{report}");
    assert!(report.contains("OK"), "{report}");
}
