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

/// Runs cargo in the workspace, without the package variables `cargo run`
/// gave this process (CARGO_PKG_NAME=xtask, CARGO_MANIFEST_DIR, …): a
/// build script that watches them (ring's) would take every build started
/// here for a changed one and rebuild it and all that depends on it
/// (rustls, ttp-window and up), once for `cargo xtask …` and again for a
/// plain `cargo build`.
pub fn cargo(args: &[&str]) -> anyhow::Result<()> {
    cargo_with(args, &[])
}

/// Clippy's lints, denied, inside the build itself: `clippy-driver` as the
/// compiler of the workspace's own crates (what `cargo clippy` runs, under
/// `cargo check`), with `-D warnings` passed as `cargo clippy -- -D
/// warnings` passes it. A build that lints costs one compilation of the
/// workspace where `cargo clippy` then `cargo build` cost two (a check of
/// every dependency and crate, then the build); the dependencies are
/// compiled by rustc as before, and the eBPF build drops the wrapper
/// (aya-build removes `RUSTC_WORKSPACE_WRAPPER`).
pub const LINTING_BUILD: &[(&str, &str)] = &[
    ("RUSTC_WORKSPACE_WRAPPER", "clippy-driver"),
    (
        "CLIPPY_ARGS",
        "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__",
    ),
];

/// [`cargo`] with these variables set for it and all it starts.
pub fn cargo_with(args: &[&str], vars: &[(&str, &str)]) -> anyhow::Result<()> {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.envs(vars.iter().copied());
    cmd.args(args).current_dir(root_dir());
    for (name, _) in std::env::vars_os() {
        let n = name.to_string_lossy();
        if n.starts_with("CARGO_PKG_")
            || n.starts_with("CARGO_MANIFEST_")
            || [
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
            ]
            .contains(&&*n)
        {
            cmd.env_remove(&name);
        }
    }
    status(&mut cmd)
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
