//! `deploy/`: the systemd unit passes `systemd-analyze verify` (with the man
//! page `weir man` generates found for its `Documentation=`) and scores as
//! sandboxed in `systemd-analyze security`; the container recipe is
//! multi-stage, runs as a non-root user and keeps the ledger on a volume; the
//! production config it ships loads. (`.ci/container-build` runs the recipe's
//! build steps.)

// Test code: a failed step should stop the test with its message.
#![allow(clippy::expect_used)]

use std::path::Path;
use std::process::Command;

fn deploy(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy").join(name);
    std::fs::read_to_string(&path).expect("a file of deploy/")
}

/// The unit as written, with `/usr/local/bin/weir` (where it is installed)
/// pointed at the binary under test: verify checks each command exists.
#[test]
fn the_systemd_unit_verifies_and_is_sandboxed() {
    let unit = deploy("weir.service");
    assert_eq!(unit.matches("/usr/local/bin/weir ").count(), 2, "ExecStartPre and ExecStart run the installed binary");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("weir.service");
    std::fs::write(&file, unit.replace("/usr/local/bin/weir ", &format!("{} ", env!("CARGO_BIN_EXE_weir"))))
        .expect("write the unit");
    let man = dir.path().join("man/man1");
    std::fs::create_dir_all(&man).expect("man folder");
    let page = Command::new(env!("CARGO_BIN_EXE_weir")).arg("man").output().expect("weir man");
    std::fs::write(man.join("weir.1"), page.stdout).expect("write the page");

    let verify = Command::new("systemd-analyze")
        .args(["verify", file.to_str().expect("utf-8 path")])
        .env("MANPATH", dir.path().join("man"))
        .output()
        .expect("run systemd-analyze verify");
    assert!(verify.status.success() && verify.stderr.is_empty(), "{verify:?}");

    // The exposure score is 0-100 here (shown as 0.0-10.0): the unit's is 15.
    let security = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--threshold=20", "--no-pager", file.to_str().expect("utf-8 path")])
        .output()
        .expect("run systemd-analyze security");
    assert!(security.status.success(), "{}", String::from_utf8_lossy(&security.stdout));
    let report = String::from_utf8_lossy(&security.stdout);
    for option in ["PrivateDevices=", "ProtectSystem=", "RestrictAddressFamilies=~AF_PACKET", "NoNewPrivileges="] {
        let line = report.lines().find(|line| line.contains(option)).unwrap_or_default();
        assert!(line.trim_start().starts_with('✓'), "{option}: {line}");
    }
}

#[test]
fn the_container_recipe_is_multi_stage_non_root_with_the_ledger_on_a_volume() {
    let recipe = deploy("Containerfile");
    let instructions: Vec<&str> =
        recipe.lines().map(str::trim).filter(|line| !line.is_empty() && !line.starts_with('#')).collect();
    let stages: Vec<&&str> = instructions.iter().filter(|line| line.starts_with("FROM ")).collect();
    assert_eq!(stages.len(), 2, "{stages:?}");
    assert!(instructions.contains(&"RUN deploy/build.sh /out"), "the build stage runs the script CI runs");
    let run_stage = instructions.iter().position(|line| line.starts_with("FROM ") && line.contains(" AS run"));
    let run_stage = &instructions[run_stage.expect("a run stage")..];
    assert!(!run_stage.iter().any(|line| line.starts_with("RUN ")), "nothing runs in the final image's build");
    let user = run_stage.iter().find_map(|line| line.strip_prefix("USER ")).expect("a USER");
    assert!(!user.starts_with("0") && !user.starts_with("root"), "{user}");
    assert!(run_stage.contains(&"VOLUME [\"/var/lib/weir\"]"));
    assert!(run_stage.iter().any(|line| line.contains("WEIR_DATA_DIR=/var/lib/weir")), "the ledger goes to the volume");
    assert!(recipe.contains("--read-only"), "the recipe's run line keeps the root filesystem read-only");
}

/// The config the unit and the image ship loads as `weir serve` would load it.
#[test]
fn the_shipped_config_passes_check() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/weir.toml");
    let output = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["config", "check", path.to_str().expect("utf-8 path")])
        .env("WEIR_CACHE_DIR", std::env::temp_dir().join("weir-cli-test-cache"))
        .output()
        .expect("run weir");
    assert!(output.status.success(), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("would listen on 0.0.0.0:8080"), "{output:?}");
}
