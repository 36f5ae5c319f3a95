//! The floor of the overhead benchmark (`cargo xtask bench overhead
//! --floor`): an empty tp_btf program on `sched_switch`, alone and with the
//! kernel's BPF statistics on (as ttp holds them to report its own cost).
//! What ttp costs above the second is the ledger's own work; the two
//! together are what any tool that hooks every switch and states its cost
//! pays before doing anything.
//!
//! The program and its loader are C (xtask/floor/), built here with clang
//! and libbpf from Debian's packages: the floor must not depend on the
//! project's own loader or eBPF toolchain, whose cost is what is measured.
use std::{path::PathBuf, process::Command};

use anyhow::Context;

use super::{Tracer, start_ready};
use crate::{setup, util};

/// The built loader and the empty program's object.
pub struct Floor {
    loader: PathBuf,
    object: PathBuf,
}

const CLANG: &str = "clang-22";

impl Floor {
    /// Installs what the build needs (once) and builds both into
    /// target/floor/.
    pub fn build() -> anyhow::Result<Floor> {
        setup::ensure_packages(
            &[CLANG, "libbpf-dev", "gcc"],
            "the empty sched_switch program and its loader (bench overhead --floor)",
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
        let object = out.join("empty_switch.bpf.o");
        util::status(
            Command::new(CLANG)
                .args(["-O2", "-g", "-target", "bpf", "-c"])
                .arg(src.join("empty_switch.bpf.c"))
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

    /// The empty program attached (with the BPF statistics held on when
    /// `stats`) until the returned tracer is stopped.
    pub fn start(&self, stats: bool) -> anyhow::Result<Tracer> {
        let mut cmd = Command::new(&self.loader);
        cmd.arg(&self.object);
        if stats {
            cmd.arg("--stats");
        }
        start_ready(cmd, "floor ready", "the floor loader")
    }
}
