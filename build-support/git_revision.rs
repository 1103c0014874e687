//! The commit a source tree is at, for `weir --version` (`host/build.rs`;
//! `host/tests/about_cli.rs` runs it on a tree without `.git`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A revision and the files whose change moves it.
#[derive(Debug)]
pub struct Revision {
    /// The short commit hash, the override, or `unknown`.
    pub name: String,
    /// HEAD's file, the branch's ref and the packed refs: a build script
    /// reruns when one changes.
    pub watch: Vec<PathBuf>,
}

/// `overriding` when set (`WEIR_GIT_REVISION`: a build from an archive or a
/// container context that knows its commit), else `git rev-parse` when
/// `workspace` is a git checkout, else `unknown` — a tree without `.git`
/// builds all the same. Uncommitted changes are not detected: the revision
/// names the commit, not the tree.
pub fn git_revision(workspace: &Path, overriding: Option<String>) -> Revision {
    if let Some(name) = overriding.map(|name| name.trim().to_owned()).filter(|name| !name.is_empty()) {
        return Revision { name, watch: Vec::new() };
    }
    // Only this workspace's own `.git` (a file in a worktree): a tree without
    // one copied inside another repository must not take that one's commit.
    if !workspace.join(".git").exists() {
        return Revision { name: "unknown".to_owned(), watch: Vec::new() };
    }
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(workspace)
            .output()
            .ok()
            .filter(|output| output.status.success())
            .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
    };
    let mut watch: Vec<PathBuf> = ["HEAD", "packed-refs"]
        .into_iter()
        .filter_map(|name| git(&["rev-parse", "--git-path", name]))
        .map(|path| workspace.join(path))
        .collect();
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(path) = git(&["rev-parse", "--git-path", &branch])
    {
        watch.push(workspace.join(path));
    }
    let name = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_owned());
    Revision { name, watch }
}
