//! Running commands with their output shown, and failing with the command
//! line when they fail.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, bail};

pub fn root_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root_dir().join("target"))
}

pub fn status(cmd: &mut Command) -> anyhow::Result<()> {
    let shown = format!("{cmd:?}");
    let st = cmd.status().with_context(|| format!("starting {shown}"))?;
    if !st.success() {
        bail!("{shown} failed: {st}");
    }
    Ok(())
}

pub fn cargo(args: &[&str]) -> anyhow::Result<()> {
    status(
        Command::new(env!("CARGO"))
            .args(args)
            .current_dir(root_dir()),
    )
}

/// Runs cargo with the nightly toolchain in the eBPF crate, for its target.
pub fn cargo_nightly_ebpf(args: &[&str]) -> anyhow::Result<()> {
    let (sub, rest) = args.split_first().expect("a cargo subcommand");
    status(
        Command::new("rustup")
            .args(["run", "nightly", "cargo", sub])
            .args([
                "-Z",
                "build-std=core",
                "--target",
                "bpfel-unknown-none",
                "--release",
            ])
            .args(rest)
            .current_dir(root_dir().join("ttp-ebpf"))
            .env_remove("RUSTC")
            .env_remove("RUSTUP_TOOLCHAIN"),
    )
}

/// Output of a command, or None if it cannot run.
pub fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn is_root() -> bool {
    // SAFETY: no arguments.
    unsafe { libc_geteuid() == 0 }
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// Runs `bin args` as root: directly when already root, else through sudo.
pub fn sudo_run(bin: &Path, args: &[String]) -> anyhow::Result<()> {
    if is_root() {
        status(Command::new(bin).args(args))
    } else {
        println!("xtask: ttp needs root for eBPF; running it with sudo");
        status(Command::new("sudo").arg(bin).args(args))
    }
}
