//! The gateway harness, tested against stand-in shell scripts that follow the `weir serve`
//! contract (or break it), so the harness is proven before the real binary exists.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tempfile::TempDir;
use weir_tests::Gateway;

/// Writes an executable `weir` stand-in with this shell body.
fn stand_in(dir: &TempDir, body: &str) -> PathBuf {
    let path = dir.path().join("weir");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    let status = Command::new("chmod").arg("+x").arg(&path).status().unwrap();
    assert!(status.success());
    path
}

fn is_alive(pid: u32) -> bool {
    Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

const WELL_BEHAVED: &str = r#"
echo "args: $*" >&2
echo "cache=$WEIR_CACHE_DIR log=$RUST_LOG extra=$EXTRA" >&2
echo "cwd=$(pwd)" >&2
echo "config: $(cat "$3")" >&2
echo "listening on 127.0.0.1:4321"
echo "serving" >&2
exec sleep 60
"#;

#[tokio::test]
async fn start_passes_config_args_and_env_and_reads_the_address() {
    let bin_dir = tempfile::tempdir().unwrap();
    let binary = stand_in(&bin_dir, WELL_BEHAVED);
    let providers = Path::new("/opt/providers");
    let gateway = Gateway::start_binary(
        &binary,
        "[gateway]\nname = \"t\"\n",
        &[("EXTRA", "1"), ("RUST_LOG", "debug")],
        Some(providers),
    )
    .await;

    assert_eq!(gateway.base_url, "http://127.0.0.1:4321");
    assert_eq!(gateway.url("/v1/models"), "http://127.0.0.1:4321/v1/models");
    let stderr = gateway.wait_for_stderr("serving", Duration::from_secs(5)).await;
    let config = gateway.config_path().display().to_string();
    assert!(
        stderr.contains(&format!("args: serve --config {config} --listen 127.0.0.1:0 --providers-dir /opt/providers")),
        "{stderr}"
    );
    let cache = bin_dir.path().parent().unwrap().join("weir-test-cache");
    assert!(
        stderr.contains(&format!("cache={} log=debug extra=1", cache.display())),
        "default cache dir, caller's RUST_LOG wins: {stderr}"
    );
    assert!(stderr.contains(&format!("cwd={}", gateway.dir().display())), "{stderr}");
    assert!(stderr.contains("config: [gateway]"), "{stderr}");
    assert_eq!(gateway.stdout_lines(), vec!["listening on 127.0.0.1:4321".to_owned()]);
}

#[tokio::test]
async fn drop_kills_the_child_and_removes_its_dir() {
    let bin_dir = tempfile::tempdir().unwrap();
    let binary = stand_in(&bin_dir, WELL_BEHAVED);
    let gateway = Gateway::start_binary(&binary, "", &[], None).await;
    let pid = gateway.pid();
    let dir = gateway.dir().to_owned();
    assert!(is_alive(pid));
    drop(gateway);
    assert!(!is_alive(pid), "child {pid} survived the drop");
    assert!(!dir.exists());
}

#[tokio::test]
async fn terminate_sends_sigterm() {
    let bin_dir = tempfile::tempdir().unwrap();
    let binary = stand_in(
        &bin_dir,
        r#"trap 'echo got-term >&2; exit 0' TERM
echo "listening on 127.0.0.1:1"
while true; do sleep 0.05; done"#,
    );
    let mut gateway = Gateway::start_binary(&binary, "", &[], None).await;
    let status = gateway.terminate(Duration::from_secs(5)).unwrap();
    assert!(status.success(), "{status:?}");
    gateway.wait_for_stderr("got-term", Duration::from_secs(5)).await;
}

#[tokio::test]
#[should_panic(expected = "unknown key `colour`")]
async fn start_failure_panics_with_the_child_stderr() {
    let bin_dir = tempfile::tempdir().unwrap();
    let binary = stand_in(&bin_dir, "echo 'error: unknown key `colour`' >&2; exit 2");
    let _gateway = Gateway::start_binary(&binary, "colour = 1", &[], None).await;
}
