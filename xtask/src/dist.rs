//! `cargo xtask dist`: a Debian package of ttp-ebpf (docs/serve.md,
//! "Package"): the binary, a man page for it and every subcommand, bash
//! completion, the serve unit and the docs, staged in a tree and built with
//! dpkg-deb. `--debug` packages the debug build the tests already have.
use std::{path::Path, process::Command};

use anyhow::{Context, bail};

use crate::util;

pub const PACKAGE: &str = "ttp-ebpf";

/// Builds the package; returns its path.
pub fn build(debug: bool) -> anyhow::Result<std::path::PathBuf> {
    let profile = if debug { "debug" } else { "release" };
    if debug {
        // The workspace's `build --bins`, as `cargo xtask test` runs it:
        // `-p ttp-user` alone resolves features differently and so built
        // ttp-user and its crates a third time (~0.5 GB) inside the test.
        util::cargo(&["build", "--bins"])?;
    } else {
        util::cargo(&["build", "--release", "-p", "ttp-user"])?;
    }
    let target = util::target_dir();
    let bin = target.join(profile).join("ttp-ebpf");
    let version = env!("CARGO_PKG_VERSION");
    let arch = stdout_of("dpkg", &["--print-architecture"])?;
    let out = target.join("dist");
    let root = out.join(format!("{PACKAGE}_{version}_{arch}"));
    let _ = std::fs::remove_dir_all(&root);
    let assets = out.join("assets");
    let _ = std::fs::remove_dir_all(&assets);
    util::status(
        Command::new(&bin)
            .args(["dist-assets", "--out"])
            .arg(&assets),
    )?;
    let repo = util::root_dir();
    let put = |from: &Path, to: &str, mode: u32| -> anyhow::Result<()> {
        let dest = root.join(to);
        std::fs::create_dir_all(dest.parent().expect("a file in a directory"))?;
        std::fs::copy(from, &dest).with_context(|| format!("copying {}", from.display()))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(mode))?;
        Ok(())
    };
    put(&bin, "usr/bin/ttp-ebpf", 0o755)?;
    for page in std::fs::read_dir(assets.join("man"))? {
        let page = page?.path();
        let name = page
            .file_name()
            .expect("file")
            .to_string_lossy()
            .into_owned();
        let dest = format!("usr/share/man/man1/{name}.gz");
        put(&page, &dest, 0o644)?;
        // man pages are shipped gzipped (Debian Policy 12.1); -n leaves the
        // name and time out, so the same build gives the same package.
        util::status(Command::new("gzip").args(["-9nf"]).arg(root.join(&dest)))?;
        std::fs::rename(root.join(format!("{dest}.gz")), root.join(&dest))?;
    }
    put(
        &assets.join("completions/ttp-ebpf.bash"),
        "usr/share/bash-completion/completions/ttp-ebpf",
        0o644,
    )?;
    put(
        &repo.join("packaging/ttp-serve.service"),
        "lib/systemd/system/ttp-serve.service",
        0o644,
    )?;
    put(
        &repo.join("README.md"),
        "usr/share/doc/ttp-ebpf/README.md",
        0o644,
    )?;
    for doc in std::fs::read_dir(repo.join("docs"))? {
        let doc = doc?.path();
        if doc.extension().is_some_and(|e| e == "md") {
            let name = doc
                .file_name()
                .expect("file")
                .to_string_lossy()
                .into_owned();
            put(&doc, &format!("usr/share/doc/ttp-ebpf/{name}"), 0o644)?;
        }
    }
    std::fs::write(
        root.join("usr/share/doc/ttp-ebpf/copyright"),
        "ttp-ebpf\nLicense: MIT OR Apache-2.0\n",
    )?;
    let size_kib = du_kib(&root);
    std::fs::create_dir_all(root.join("DEBIAN"))?;
    std::fs::write(
        root.join("DEBIAN/control"),
        format!(
            "Package: {PACKAGE}\nVersion: {version}\nArchitecture: {arch}\nMaintainer: ttp <ttp@localhost>\nInstalled-Size: {size_kib}\nDepends: libc6, libgcc-s1\nSection: devel\nPriority: optional\nDescription: eBPF ledger of where every thread's time went\n ttp-ebpf keeps an in-kernel ledger of on-CPU, run-queue wait, sleep,\n blocked and I/O wait time per thread, measures programs and database\n queries with the TTPv2 and EMP protocols, and serves the ledger to\n Prometheus (ttp-ebpf serve).\n"
        ),
    )?;
    let deb = out.join(format!("{PACKAGE}_{version}_{arch}.deb"));
    util::status(
        Command::new("dpkg-deb")
            .args(["--root-owner-group", "-Zxz", "--build"])
            .arg(&root)
            .arg(&deb),
    )?;
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&assets);
    println!("xtask: built {}", deb.display());
    Ok(deb)
}

fn stdout_of(cmd: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .with_context(|| format!("running {cmd}"))?;
    if !out.status.success() {
        bail!("{cmd} {} failed", args.join(" "));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn du_kib(dir: &Path) -> u64 {
    fn walk(p: &Path) -> u64 {
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.is_dir() => std::fs::read_dir(p)
                .map(|d| d.flatten().map(|e| walk(&e.path())).sum())
                .unwrap_or(0),
            Ok(m) => m.len(),
            Err(_) => 0,
        }
    }
    walk(dir).div_ceil(1024)
}
