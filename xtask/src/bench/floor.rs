//! Floors of the benchmarks: empty tp_btf programs on the tracepoints ttp
//! hooks. `cargo xtask bench overhead --floor` loads one on `sched_switch`,
//! alone and with the kernel's BPF statistics on (as ttp holds them to
//! report its own cost): what ttp costs above the second is the ledger's
//! own work; the two together are what any tool that hooks every switch
//! and states its cost pays before doing anything. It also loads empty
//! classic tracepoint programs at the same tracepoints, the kind most
//! tools (bpftrace's `tracepoint:`, bcc) attach. `cargo xtask bench
//! statements` loads two on `sock_recv_length` and `sock_send_length`, the
//! floor of statement boundaries at the client socket.
//!
//! The program and its loader are C (xtask/floor/), built here with clang
//! and libbpf from Debian's packages: the floor must not depend on the
//! project's own loader or eBPF toolchain, whose cost is what is measured.
use std::{path::PathBuf, process::Command};

use anyhow::Context;

use super::procs::{Tracer, start_ready};
use crate::{setup, util};

/// Which empty programs a floor loads (their source in xtask/floor/).
#[derive(Clone, Copy)]
pub enum Hook {
    /// Every tracepoint the default ledger hooks (bench overhead).
    Ledger,
    /// The same tracepoints, classic programs (BPF_PROG_TYPE_TRACEPOINT,
    /// bench overhead).
    Classic,
    /// `sock_recv_length` and `sock_send_length` (bench statements).
    Socket,
}

impl Hook {
    fn stem(self) -> &'static str {
        match self {
            Hook::Ledger => "empty_ledger",
            Hook::Classic => "empty_classic",
            Hook::Socket => "empty_socket",
        }
    }
}

/// The built loader and the empty programs' object.
pub struct Floor {
    loader: PathBuf,
    object: PathBuf,
}

const CLANG: &str = "clang-22";

impl Floor {
    /// Installs what the build needs (once) and builds both into
    /// target/floor/.
    pub fn build(hook: Hook) -> anyhow::Result<Floor> {
        setup::ensure_packages(
            &[CLANG, "libbpf-dev", "gcc"],
            "the empty tp_btf programs and their loader (the benchmarks' floors)",
        )?;
        let src = util::root_dir().join("xtask/floor");
        let out = util::target_dir().join("floor");
        std::fs::create_dir_all(&out).context("creating target/floor")?;
        // <linux/bpf.h> includes <asm/types.h>, which Debian keeps under
        // the multiarch directory that clang's BPF target does not search.
        let multiarch = util::output("gcc", &["-print-multiarch"])
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .context("gcc -print-multiarch gave nothing")?;
        let object = out.join(format!("{}.bpf.o", hook.stem()));
        util::status(
            Command::new(CLANG)
                .args(["-O2", "-g", "-target", "bpf", "-c"])
                .arg(src.join(format!("{}.bpf.c", hook.stem())))
                .arg(format!("-I/usr/include/{multiarch}"))
                .arg("-o")
                .arg(&object),
        )?;
        let loader = out.join("floor-loader");
        util::status(
            Command::new("gcc")
                .args(["-O2", "-Wall"])
                .arg(src.join("loader.c"))
                .arg("-o")
                .arg(&loader)
                .arg("-lbpf"),
        )?;
        Ok(Floor { loader, object })
    }

    /// The empty programs attached (with the BPF statistics held on when
    /// `stats`) until the returned tracer is stopped; with `stats_out`, the
    /// loader writes each program's runs and run time there as it ends
    /// ([`read_stats`]).
    pub fn start(
        &self,
        stats: bool,
        stats_out: Option<&std::path::Path>,
    ) -> anyhow::Result<Tracer> {
        let mut cmd = Command::new(&self.loader);
        cmd.arg(&self.object);
        if stats {
            cmd.arg("--stats");
            if let Some(f) = stats_out {
                cmd.arg(f);
            }
        }
        start_ready(cmd, "floor ready", "the floor loader")
    }
}

/// The loader's `--stats FILE` lines: (program, runs, run time ns).
pub fn read_stats(path: &std::path::Path) -> anyhow::Result<Vec<(String, u64, u64)>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((
                f.next()?.to_owned(),
                f.next()?.parse().ok()?,
                f.next()?.parse().ok()?,
            ))
        })
        .collect())
}
