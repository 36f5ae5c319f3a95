//! Idempotent installation of the build prerequisites. Each step checks
//! first and says what it installs and why.
use std::{path::Path, process::Command};

use anyhow::{Context, bail};

use crate::util::{is_root, output, status};

pub const BPF_LINKER_VERSION: &str = "0.13.0";
const LLVM_PREFIX: &str = "/usr/lib/llvm-22";
const APT_LLVM: &[&str] = &[
    "llvm-22-dev",
    "libpolly-22-dev",
    "libzstd-dev",
    "zlib1g-dev",
];

pub fn all() -> anyhow::Result<()> {
    rust_src()?;
    bpf_linker()?;
    postgresql()?;
    crate::pg_versions::fetch_all()?;
    real_software()?;
    prometheus()?;
    Ok(())
}

/// A real Prometheus server for the `serve` tests (tests/tests/serve.rs
/// start one on loopback with a scrape config of their own and a temporary
/// storage directory; the package's own service is never used), and the
/// openssl and curl CLIs tests/tests/serve_tls.rs makes a certificate with
/// and scrapes over TLS with. Those tests run as root only, so without
/// root anything missing is only reported.
fn prometheus() -> anyhow::Result<()> {
    let missing: Vec<&str> = [
        ("prometheus", "/usr/bin/prometheus"),
        ("openssl", "/usr/bin/openssl"),
        ("curl", "/usr/bin/curl"),
    ]
    .into_iter()
    .filter(|(_, bin)| !Path::new(bin).is_file())
    .map(|(package, _)| package)
    .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        println!(
            "xtask: the serve tests need {} and root (sudo apt-get install {})",
            missing.join(", "),
            missing.join(" ")
        );
        return Ok(());
    }
    apt_install(
        &missing,
        "a Prometheus server and the openssl and curl CLIs, for the serve tests",
    )
}

/// Debian packages of the real programs tests/tests/realworld.rs measures
/// (GNU sort with threads, xz, gzip) and of the independent tool it checks
/// them against (GNU time's /usr/bin/time), and perf, whose record of the
/// block and scheduler tracepoints tests/tests/ledger_wake.rs checks the
/// own-I/O time against, and libc6-dbg, the C library's debug file under
/// /usr/lib/debug/.build-id, through which the symbol tests name libc's
/// static functions as a distribution's debug package does. Most are on
/// every Debian system already; only the missing ones are installed.
const REAL_SOFTWARE: &[&str] = &[
    "coreutils",
    "xz-utils",
    "gzip",
    "time",
    "linux-perf",
    "libc6-dbg",
];

fn real_software() -> anyhow::Result<()> {
    let missing: Vec<&str> = REAL_SOFTWARE
        .iter()
        .copied()
        .filter(|p| !dpkg_installed(&[p]))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        println!(
            "xtask: the real-software tests need {} (sudo apt-get install {})",
            missing.join(", "),
            missing.join(" ")
        );
        return Ok(());
    }
    apt_install(
        &missing,
        "real programs, /usr/bin/time, perf and libc's debug file, for tests/tests/realworld.rs, ledger_wake.rs and the symbol tests",
    )
}

/// PostgreSQL's server binaries for the DBMS tests (tests/tests/postgres.rs
/// start a throw-away cluster with them). Debian's server package carries
/// the contrib modules too (pg_stat_statements, for tests/tests/statements.rs),
/// and its binary the USDT probes `statements` attaches to. Those tests run as root only, so
/// without root a missing server is only reported.
fn postgresql() -> anyhow::Result<()> {
    let installed = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.flatten().any(|v| v.path().join("bin/initdb").is_file()))
        .unwrap_or(false);
    if installed {
        return Ok(());
    }
    if !is_root() {
        println!(
            "xtask: PostgreSQL is not installed; the PostgreSQL tests need it and root (sudo apt-get install postgresql)"
        );
        return Ok(());
    }
    apt_install(&["postgresql"], "PostgreSQL server, for the DBMS tests")
}

fn rust_src() -> anyhow::Result<()> {
    let installed = output(
        "rustup",
        &["component", "list", "--toolchain", "nightly", "--installed"],
    )
    .context("rustup is needed (the eBPF programs build with the nightly toolchain)")?;
    if installed.lines().any(|l| l.starts_with("rust-src")) {
        return Ok(());
    }
    println!(
        "xtask: installing rust-src for the nightly toolchain (the eBPF target builds core from source)"
    );
    status(Command::new("rustup").args(["component", "add", "rust-src", "--toolchain", "nightly"]))
}

fn bpf_linker() -> anyhow::Result<()> {
    if output("bpf-linker", &["--version"]).is_some_and(|v| v.contains(BPF_LINKER_VERSION)) {
        return Ok(());
    }
    if !Path::new(LLVM_PREFIX).join("lib/libLLVM.so").exists() {
        apt_install(APT_LLVM, "LLVM 22 development files, to build bpf-linker")?;
    }
    println!(
        "xtask: building bpf-linker {BPF_LINKER_VERSION} against LLVM 22 (a few minutes, once)"
    );
    let path = format!(
        "{LLVM_PREFIX}/bin:{}",
        std::env::var("PATH").unwrap_or_default()
    );
    status(
        Command::new(env!("CARGO"))
            .args([
                "install",
                "bpf-linker",
                "--version",
                BPF_LINKER_VERSION,
                "--no-default-features",
                "--features",
                "llvm-22",
                "--locked",
            ])
            .env("LLVM_PREFIX", LLVM_PREFIX)
            .env("PATH", path),
    )
}

/// `apt-get install` of `packages`, explaining `why`.
pub fn apt_install(packages: &[&str], why: &str) -> anyhow::Result<()> {
    if !is_root() {
        bail!(
            "{why}: these Debian packages are missing: {}. Install them (sudo apt-get install {}) or run this as root.",
            packages.join(" "),
            packages.join(" ")
        );
    }
    println!("xtask: installing {} ({why})", packages.join(", "));
    status(Command::new("apt-get").args(["update", "-qq"]))?;
    status(
        Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
}

/// True when every one of `packages` is installed.
pub fn dpkg_installed(packages: &[&str]) -> bool {
    packages.iter().all(|p| {
        output("dpkg-query", &["-W", "-f=${Status}", p])
            .is_some_and(|s| s.contains("install ok installed"))
    })
}

pub fn ensure_packages(packages: &[&str], why: &str) -> anyhow::Result<()> {
    if dpkg_installed(packages) {
        return Ok(());
    }
    apt_install(packages, why)
}

/// Mounts tracefs for tools that need classic tracepoints (bpftrace);
/// returns whether it mounted it (the caller unmounts it again).
pub fn mount_tracefs() -> anyhow::Result<bool> {
    if Path::new("/sys/kernel/tracing/events").exists() {
        return Ok(false);
    }
    status(Command::new("mount").args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"]))?;
    Ok(true)
}

pub fn umount_tracefs() {
    let _ = Command::new("umount").arg("/sys/kernel/tracing").status();
}
