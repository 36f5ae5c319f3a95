//! `ttp-ebpf dist-assets --out DIR` (hidden): the man pages of the command
//! and every subcommand (clap_mangen) and its bash completion
//! (clap_complete), generated from the same clap definitions the binary
//! parses with, for `cargo xtask dist` to package.
use std::path::PathBuf;

/// Write man pages (DIR/man) and bash completion (DIR/completions).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// `cmd` is the whole command line's definition (`Cli::command()`).
pub fn run(args: Args, mut cmd: clap::Command) -> anyhow::Result<()> {
    let man = args.out.join("man");
    let completions = args.out.join("completions");
    std::fs::create_dir_all(&man)?;
    std::fs::create_dir_all(&completions)?;
    cmd.build();
    // One page per subcommand; `help SUBCOMMAND` would only repeat them.
    clap_mangen::generate_to(cmd.clone().disable_help_subcommand(true), &man)?;
    clap_complete::generate_to(
        clap_complete::Shell::Bash,
        &mut cmd,
        "ttp-ebpf",
        &completions,
    )?;
    Ok(())
}
