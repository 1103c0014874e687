//! What the binary says about itself: `weir --version` (the git revision it
//! was built from, the WIT worlds it speaks, the digests of the components
//! compiled into it), `weir completions SHELL` and `weir man`, the last two
//! generated from the clap definition so they cannot list a flag the binary
//! does not take.

use std::io::Write;

use clap::CommandFactory;

/// `weir -V`: the package version and the commit (`unknown` for a build from
/// a tree without `.git` or `WEIR_GIT_REVISION`).
pub fn short_version() -> String {
    format!("{} (git {})", env!("CARGO_PKG_VERSION"), env!("WEIR_GIT_REVISION"))
}

/// `weir --version`: the short version, then the worlds and the embedded
/// components' SHA-256 digests (what `weir providers` shows for each, and
/// what `allowed_digests` would name).
pub fn long_version() -> String {
    let mut text = short_version();
    let older: Vec<&str> =
        weir_host::plugin::WORLD_VERSIONS.iter().copied().filter(|v| *v != weir_host::plugin::WORLD_VERSION).collect();
    text.push_str(&format!(
        "\nWIT world: weir:provider@{} (components built for {} load too, converted)",
        weir_host::plugin::WORLD_VERSION,
        older.join(", ")
    ));
    text.push_str("\nembedded components (sha256):");
    for component in weir_host::plugin::EMBEDDED {
        text.push_str(&format!("\n  {:<26} {}", component.name, component.digest));
    }
    text
}

/// The clap definition with its version texts: what parses the command line
/// and what the completions and the man page are generated from.
pub fn command<C: CommandFactory>() -> clap::Command {
    // Leaked once per process: clap keeps `&'static str` versions.
    C::command().version(&*short_version().leak()).long_version(&*long_version().leak())
}

/// `weir completions SHELL`: the completion script on stdout.
pub fn completions<C: CommandFactory>(shell: clap_complete::Shell) -> anyhow::Result<()> {
    let mut command = command::<C>();
    // Into memory first: the generator panics on a failed write (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "weir", &mut script);
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&script)?;
    stdout.flush()?;
    Ok(())
}

/// `weir man`: the roff man page (section 1) on stdout; with `--out DIR`,
/// one page per command (`weir.1`, `weir-serve.1`, `weir-config-check.1`, ...)
/// written into DIR.
pub fn man<C: CommandFactory>(out: Option<&std::path::Path>) -> anyhow::Result<()> {
    let command = command::<C>();
    match out {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|error| anyhow::anyhow!("cannot create {}: {error}", dir.display()))?;
            clap_mangen::generate_to(command, dir)
                .map_err(|error| anyhow::anyhow!("cannot write the man pages into {}: {error}", dir.display()))?;
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            clap_mangen::Man::new(command).render(&mut stdout)?;
            stdout.flush()?;
        }
    }
    Ok(())
}
