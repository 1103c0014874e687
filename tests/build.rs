//! Builds the test components for `wasm32-wasip2` and tells the tests where they
//! are: the provider template (`providers/ollama`), the hostile provider (`tests/hostile`, as is and with its `filesystem`
//! and `v2` features), the component that tries to choose where secrets go
//! (`tests/reach`), the foreign components (`tests/foreign`: another world
//! version, mixed versions, no operation, logprobs without chat, wrong function types, another world), the one-operation
//! components (`tests/operations`: a 0.1.0 chat one, one chat component built
//! against 0.4.0 and against 0.5.0, an embeddings-only and a rerank-only 0.3.0 one), the provider whose stream decoder is broken one way
//! per key (`tests/broken-streams`), the Python providers (`providers/hermes-py` and the
//! Python template `providers/template-py`, built with componentize-py), and the
//! JavaScript template (`providers/template-js`, built with the componentize-js its
//! `npm ci` installed).

#[path = "../build-support/wasm_guest.rs"]
mod wasm_guest;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// (package, features, artifact, the name it is kept under, env var for the tests)
const BUILDS: [(&str, Option<&str>, &str, &str, &str); 19] = [
    ("weir-provider-ollama", None, "weir_provider_ollama.wasm", "template", "WEIR_TEMPLATE_WASM"),
    ("weir-hostile-provider", None, "weir_hostile_provider.wasm", "hostile", "WEIR_HOSTILE_WASM"),
    ("weir-hostile-provider", Some("filesystem"), "weir_hostile_provider.wasm", "hostile-fs", "WEIR_HOSTILE_FS_WASM"),
    ("weir-hostile-provider", Some("v2"), "weir_hostile_provider.wasm", "hostile-v2", "WEIR_HOSTILE_V2_WASM"),
    (
        "weir-hostile-provider",
        Some("native"),
        "weir_hostile_provider.wasm",
        "hostile-native",
        "WEIR_HOSTILE_NATIVE_WASM",
    ),
    ("weir-reach-provider", None, "weir_reach_provider.wasm", "reach", "WEIR_REACH_WASM"),
    (
        "weir-broken-streams-provider",
        None,
        "weir_broken_streams_provider.wasm",
        "broken-streams",
        "WEIR_BROKEN_STREAMS_WASM",
    ),
    ("weir-foreign-component", None, "weir_foreign_component.wasm", "wrong-version", "WEIR_WRONG_VERSION_WASM"),
    (
        "weir-foreign-component",
        Some("other-world"),
        "weir_foreign_component.wasm",
        "wrong-world",
        "WEIR_WRONG_WORLD_WASM",
    ),
    (
        "weir-foreign-component",
        Some("describe-only"),
        "weir_foreign_component.wasm",
        "describe-only",
        "WEIR_DESCRIBE_ONLY_WASM",
    ),
    (
        "weir-foreign-component",
        Some("mixed-versions"),
        "weir_foreign_component.wasm",
        "mixed-versions",
        "WEIR_MIXED_VERSIONS_WASM",
    ),
    (
        "weir-foreign-component",
        Some("logprobs-alone"),
        "weir_foreign_component.wasm",
        "logprobs-alone",
        "WEIR_LOGPROBS_ALONE_WASM",
    ),
    (
        "weir-foreign-component",
        Some("wrong-types"),
        "weir_foreign_component.wasm",
        "wrong-types",
        "WEIR_WRONG_TYPES_WASM",
    ),
    ("weir-operations-provider", Some("chat-0-1"), "weir_operations_provider.wasm", "chat-0-1", "WEIR_CHAT_0_1_WASM"),
    ("weir-operations-provider", Some("chat-0-4"), "weir_operations_provider.wasm", "chat-0-4", "WEIR_CHAT_0_4_WASM"),
    ("weir-operations-provider", Some("chat-0-5"), "weir_operations_provider.wasm", "chat-0-5", "WEIR_CHAT_0_5_WASM"),
    ("weir-operations-provider", Some("chat-0-6"), "weir_operations_provider.wasm", "chat-0-6", "WEIR_CHAT_0_6_WASM"),
    (
        "weir-operations-provider",
        Some("embeddings"),
        "weir_operations_provider.wasm",
        "embed-only",
        "WEIR_EMBED_ONLY_WASM",
    ),
    (
        "weir-operations-provider",
        Some("rerank"),
        "weir_operations_provider.wasm",
        "rerank-only",
        "WEIR_RERANK_ONLY_WASM",
    ),
];

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let workspace = wasm_guest::workspace()?;
    wasm_guest::rerun_if_changed(
        &workspace,
        &[
            "tests/hostile",
            "tests/foreign",
            "tests/reach",
            "tests/operations",
            "tests/broken-streams",
            "tests/build.rs",
            "providers/ollama",
            "sdk",
            "wit",
            "build-support",
            "Cargo.toml",
            ".cargo/config.toml",
        ],
    );
    // One target dir for every guest, so their shared dependencies compile once; each
    // artifact is copied out before the next build (same package, other features)
    // overwrites it.
    let dir = workspace.join("target").join("test-guests");
    let kept = dir.join("kept");
    std::fs::create_dir_all(&kept).map_err(|e| format!("cannot create {}: {e}", kept.display()))?;
    for (package, features, artifact, name, var) in BUILDS {
        let out = wasm_guest::build_components(&workspace, &dir, &[package], features)?;
        let copy = kept.join(format!("{name}.wasm"));
        std::fs::copy(out.join(artifact), &copy).map_err(|e| format!("cannot copy {artifact}: {e}"))?;
        println!("cargo:rustc-env={var}={}", copy.display());
    }
    for (source, dirs, output, var) in PYTHON_PROVIDERS {
        let built = build_python_provider(&workspace, source, dirs, output)?;
        println!("cargo:rustc-env={var}={}", built.display());
    }
    let built = build_js_provider(&workspace, "providers/template-js", "app.js", "template-js/template_js.wasm")?;
    println!("cargo:rustc-env=WEIR_TEMPLATE_JS_WASM={}", built.display());
    Ok(())
}

/// Builds a JavaScript provider into `target/<output>` with the componentize-js that
/// `npm ci` installed in its folder (pinned by its `package-lock.json`). This needs no
/// network: a missing `node_modules` is an error that says how to install it (`.ci/run`
/// does, before `cargo test`); the JavaScript provider is never skipped. `--disable`
/// of every WASI feature makes a component that imports nothing but the world's types.
fn build_js_provider(workspace: &Path, source: &str, module: &str, output: &str) -> Result<PathBuf, String> {
    let source = workspace.join(source);
    for file in [module, "package-lock.json"] {
        println!("cargo:rerun-if-changed={}", source.join(file).display());
    }
    let componentize = source.join("node_modules/.bin/componentize-js");
    if !componentize.is_file() {
        return Err(format!(
            "{} is missing: it builds the JavaScript provider the tests load. Install it with \
             `npm ci --prefix {}` (Node 20 or later; needs the npm registry once)",
            componentize.display(),
            source.strip_prefix(workspace).unwrap_or(&source).display()
        ));
    }
    let output = workspace.join("target").join(output);
    if let Some(out_dir) = output.parent() {
        std::fs::create_dir_all(out_dir).map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    }
    let result = Command::new(&componentize)
        .arg(source.join(module))
        .arg("--wit")
        .arg(workspace.join("wit"))
        .args(["--world-name", "chat-provider", "--disable", "stdio", "random", "clocks", "http", "fetch-event"])
        .arg("--out")
        .arg(&output)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", componentize.display()))?;
    if !result.status.success() {
        return Err(format!(
            "componentize-js failed to build {} ({}):\n{}{}",
            source.display(),
            result.status,
            String::from_utf8_lossy(&result.stdout),
            String::from_utf8_lossy(&result.stderr)
        ));
    }
    Ok(output)
}

/// (source folder, folders of its `.py` files, output under `target/`, env var for
/// the tests). The `.py` folders are listed, not watched whole: a folder would count
/// the `__pycache__` unit tests write as a change and rebuild for nothing.
const PYTHON_PROVIDERS: [(&str, &[&str], &str, &str); 2] = [
    (
        "providers/hermes-py",
        &["providers/hermes-py", "providers/hermes-py/hermes"],
        "hermes-py/hermes_text.wasm",
        "WEIR_HERMES_PY_WASM",
    ),
    ("providers/template-py", &["providers/template-py"], "template-py/template_py.wasm", "WEIR_TEMPLATE_PY_WASM"),
];

/// Builds a Python provider into `target/<output>` with componentize-py.
/// `--stub-wasi` replaces every WASI import with a trapping stub, so the component
/// imports nothing: the host links no filesystem, clock or random.
fn build_python_provider(workspace: &Path, source: &str, dirs: &[&str], output: &str) -> Result<PathBuf, String> {
    let source = workspace.join(source);
    for dir in dirs {
        for file in python_files(&workspace.join(dir))? {
            println!("cargo:rerun-if-changed={}", file.display());
        }
    }
    let output = workspace.join("target").join(output);
    if let Some(out_dir) = output.parent() {
        std::fs::create_dir_all(out_dir).map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    }
    let mut command = componentize_py()?;
    command
        .arg("--wit-path")
        .arg(workspace.join("wit"))
        .args(["--world", "chat-provider", "--quiet", "componentize", "--stub-wasi", "--python-path"])
        .arg(&source)
        .arg("--output")
        .arg(&output)
        .arg("app")
        // Byte-code caches next to the sources would only be noise.
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let result = command.output().map_err(|e| format!("cannot run componentize-py: {e}"))?;
    if !result.status.success() {
        return Err(format!(
            "componentize-py failed to build {} ({}):\n{}{}",
            source.display(),
            result.status,
            String::from_utf8_lossy(&result.stdout),
            String::from_utf8_lossy(&result.stderr)
        ));
    }
    Ok(output)
}

/// componentize-py through the Python the tests use (`$WEIR_PYTHON`, else
/// `tests/python/.venv/bin/python` if that venv exists, else `python3`), else the
/// `componentize-py` command on `PATH`. Missing everywhere is an error that says how
/// to install it: the Python provider is never skipped.
fn componentize_py() -> Result<Command, String> {
    println!("cargo:rerun-if-env-changed=WEIR_PYTHON");
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/.venv/bin/python");
    let python = std::env::var_os("WEIR_PYTHON")
        .unwrap_or_else(|| if venv.is_file() { venv.into_os_string() } else { OsString::from("python3") });
    // The package has no `__main__`; its console script is `componentize_py.script`.
    let through_python = |python: &OsString| {
        let mut command = Command::new(python);
        command.args(["-c", "import sys, componentize_py; sys.exit(componentize_py.script())"]);
        command
    };
    if works(through_python(&python)) {
        return Ok(through_python(&python));
    }
    if works(Command::new("componentize-py")) {
        return Ok(Command::new("componentize-py"));
    }
    Err(format!(
        "componentize-py is not installed (tried {} and `componentize-py` on PATH): it builds the Python \
         provider the tests load. Install it with `python3 -m pip install -r tests/python/requirements.txt`",
        python.to_string_lossy()
    ))
}

fn works(mut command: Command) -> bool {
    command.arg("--version").output().is_ok_and(|output| output.status.success())
}

fn python_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "py"))
        .collect();
    files.sort();
    Ok(files)
}
