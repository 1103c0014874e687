//! What the binary says about itself: `weir --version`, the completion
//! scripts and the man page, each generated from the clap definition and
//! exercised by the tools that read them (bash, groff).

// Test code: a failed step should stop the test with its message.
#![allow(clippy::expect_used)]

#[path = "../../build-support/git_revision.rs"]
mod git_revision;

use std::path::Path;
use std::process::{Command, Output};

fn weir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir")).args(args).output().expect("run weir")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the host crate is in the repository")
}

/// `--version` names the commit the binary was built from (this checkout's,
/// or `unknown` without `.git`), the world it speaks and the digest of every
/// embedded component; `-V` the first line only.
#[test]
fn version_names_the_revision_the_world_and_the_embedded_digests() {
    let output = weir(&["--version"]);
    assert!(output.status.success(), "{output:?}");
    let stdout = text(&output.stdout);
    let expected = git_revision::git_revision(repo_root(), std::env::var("WEIR_GIT_REVISION").ok()).name;
    assert!(stdout.starts_with(&format!("weir {} (git {expected})\n", env!("CARGO_PKG_VERSION"))), "{stdout}");
    assert!(stdout.contains(&format!("WIT world: weir:provider@{}", weir_host::plugin::WORLD_VERSION)), "{stdout}");
    for component in weir_host::plugin::EMBEDDED {
        let line = stdout.lines().find(|line| line.trim_start().starts_with(&format!("{} ", component.name)));
        assert!(line.is_some_and(|line| line.ends_with(component.digest)), "{}: {stdout}", component.name);
    }
    let short = text(&weir(&["-V"]).stdout);
    assert_eq!(short.lines().count(), 1, "{short}");
    assert_eq!(short.trim_end(), stdout.lines().next().expect("a first line"));
}

/// A source tree without `.git` (an archive, a container build context) is
/// `unknown`, and `WEIR_GIT_REVISION` names the commit for it.
#[test]
fn a_tree_without_git_is_unknown_unless_told() {
    let tree = tempfile::tempdir().expect("temp dir");
    let revision = git_revision::git_revision(tree.path(), None);
    assert_eq!(revision.name, "unknown");
    assert!(revision.watch.is_empty());
    assert_eq!(git_revision::git_revision(tree.path(), Some(" 0123abcd \n".to_owned())).name, "0123abcd");
    assert_eq!(git_revision::git_revision(tree.path(), Some(String::new())).name, "unknown");
}

/// The bash script, loaded into a real bash, completes `weir con` to
/// `config`, and `weir config ch` to `check`; the zsh and fish scripts name
/// the same commands and flags.
#[test]
fn completions_complete_the_commands_in_bash() {
    let output = weir(&["completions", "bash"]);
    assert!(output.status.success(), "{output:?}");
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("weir.bash");
    std::fs::write(&script, &output.stdout).expect("write the script");
    let complete = |words: &str| {
        let run = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
             _weir weir \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; echo \"${{COMPREPLY[@]}}\"",
            script.display()
        );
        let output = Command::new("bash").args(["-c", &run]).output().expect("run bash");
        assert!(output.status.success(), "{output:?}");
        text(&output.stdout)
    };
    assert_eq!(complete("weir con").trim(), "config");
    let config = complete("weir config ''");
    for sub in ["check", "show", "schema"] {
        assert!(config.split_whitespace().any(|word| word == sub), "{sub} in {config}");
    }
    assert!(complete("weir serve --pro").contains("--providers-dir"));
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let output = weir(&["completions", shell]);
        assert!(output.status.success(), "{shell}: {output:?}");
        let script = text(&output.stdout);
        assert!(script.contains("providers-dir") && script.contains("schema"), "{shell}: {script}");
    }
    let refused = weir(&["completions", "tcsh"]);
    assert_eq!(refused.status.code(), Some(2), "an unknown shell is a usage error: {refused:?}");
}

/// `weir man` is a roff page groff renders, listing the subcommands; `--out`
/// writes one page per command.
#[test]
fn man_renders_and_writes_a_page_per_command() {
    let output = weir(&["man"]);
    assert!(output.status.success(), "{output:?}");
    let page = text(&output.stdout);
    assert!(page.contains(".TH weir 1"), "{page}");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("weir.1");
    std::fs::write(&file, &output.stdout).expect("write the page");
    let rendered = Command::new("groff").args(["-man", "-Tutf8"]).arg(&file).output().expect("run groff");
    assert!(rendered.status.success(), "{rendered:?}");
    let rendered = text(&rendered.stdout);
    for sub in ["weir-serve(1)", "weir-config(1)", "weir-completions(1)", "weir-man(1)"] {
        assert!(rendered.replace('\u{2010}', "-").contains(sub), "{sub} in {rendered}");
    }
    let pages = dir.path().join("pages");
    let written = weir(&["man", "--out", pages.to_str().expect("utf-8 path")]);
    assert!(written.status.success(), "{written:?}");
    for name in ["weir.1", "weir-serve.1", "weir-config-check.1", "weir-ledger-query.1"] {
        let page = std::fs::read_to_string(pages.join(name)).expect(name);
        assert!(page.contains(".TH"), "{name}");
    }
    let check = std::fs::read_to_string(pages.join("weir-config-check.1")).expect("config check's page");
    assert!(check.contains("providers\\-dir"), "{check}");
}
