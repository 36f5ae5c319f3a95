//! Atomic file writes: to a temporary file in the same directory, flushed,
//! then renamed over the target. A reader (or a crash) sees either the
//! previous complete file or the new complete one.
//!
//! Result files belong to the user who asked for them: under sudo (running
//! as root with SUDO_UID set) the temporary file is given to SUDO_UID /
//! SUDO_GID before the rename, so the file never appears owned by root in
//! the user's directory, and directories ttp creates for results are given
//! to them too. Without sudo files are created as the current user anyway.
use std::{
    fs,
    io::{self, Write},
    os::fd::AsRawFd,
    path::Path,
    sync::OnceLock,
};

/// Whom result files are given to, from the effective uid and sudo's
/// variables: the invoking user when root runs on their behalf; None when
/// files are already created as the right user (not root, no sudo, or sudo
/// from root) or the variables are not ids (then files stay root's, and
/// the measured program refuses to start over the same variables).
pub(crate) fn owner_from(
    euid: u32,
    sudo_uid: Option<&str>,
    sudo_gid: Option<&str>,
) -> Option<(u32, u32)> {
    if euid != 0 {
        return None;
    }
    let uid = sudo_uid.map(str::trim).filter(|s| !s.is_empty())?;
    let invoker = super::invoker::Invoker::from_vars(Some(uid), sudo_gid, None).ok()?;
    (invoker.uid != 0 || invoker.gid != 0).then_some((invoker.uid, invoker.gid))
}

/// [`owner_from`] for this process (read once).
pub(crate) fn result_owner() -> Option<(u32, u32)> {
    static OWNER: OnceLock<Option<(u32, u32)>> = OnceLock::new();
    *OWNER.get_or_init(|| {
        let var = |n| std::env::var(n).ok();
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        owner_from(euid, var("SUDO_UID").as_deref(), var("SUDO_GID").as_deref())
    })
}

/// Gives an open file to the invoking user under sudo. A file system that
/// refuses (vfat, root-squashed NFS) keeps root's ownership: said once, the
/// result is still written.
pub fn give_to_invoker(f: &fs::File, path: &Path) {
    give_to(f, path, result_owner());
}

fn give_to(f: &fs::File, path: &Path, owner: Option<(u32, u32)>) {
    let Some((uid, gid)) = owner else {
        return;
    };
    // SAFETY: fchown on an open descriptor.
    if unsafe { libc::fchown(f.as_raw_fd(), uid, gid) } != 0 {
        static SAID: OnceLock<()> = OnceLock::new();
        let e = io::Error::last_os_error();
        SAID.get_or_init(|| {
            log::warn!(
                "cannot give {} to uid {uid} gid {gid} ({e}): it stays owned by root",
                path.display()
            );
        });
    }
}

/// Creates `dir` and its missing parents; those created are given to the
/// invoking user under sudo.
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    create_dir_all_as(dir, result_owner())
}

fn create_dir_all_as(dir: &Path, owner: Option<(u32, u32)>) -> io::Result<()> {
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .collect();
    fs::create_dir_all(dir)?;
    for d in missing.iter().rev() {
        if let Ok(f) = fs::File::open(d) {
            give_to(&f, d, owner);
        }
    }
    Ok(())
}

/// Writes `bytes` to `path` atomically, owned by the invoking user.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_with(path, bytes, true)
}

/// Writes `bytes` to `path` atomically, owned by whoever ttp runs as (the
/// machine's own state files under /run/ttp).
pub(crate) fn write_as_is(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_with(path, bytes, false)
}

fn write_with(path: &Path, bytes: &[u8], for_invoker: bool) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let prefix = format!(".{}.tmp.", name.to_string_lossy());
    remove_dead_temporaries(dir, &prefix);
    let tmp = dir.join(format!("{prefix}{}", std::process::id()));
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        if for_invoker {
            give_to_invoker(&f, path);
        }
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Removes `PREFIX<pid>` files of processes that no longer run: the
/// temporary file of a ttp killed between creating it and the rename.
fn remove_dead_temporaries(dir: &Path, prefix: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|p| p.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // SAFETY: signal 0 only checks that the process exists.
        let gone = pid > 0
            && unsafe { libc::kill(pid, 0) } != 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Serialises `value` as pretty JSON (with a trailing newline) and writes it
/// atomically.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    bytes.push(b'\n');
    write(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a writer that leaves the temporary file behind or does not
    /// replace an existing file.
    #[test]
    fn replaces_existing_file_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("ttp-atomic-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.json");
        write(&path, b"old").unwrap();
        write_json(&path, &serde_json::json!({"a": 1})).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "{\n  \"a\": 1\n}\n");
        let leftovers: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp."))
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Catches giving files away when not under sudo, giving them to root,
    /// or ignoring SUDO_GID.
    #[test]
    fn owner_only_under_sudo_as_root() {
        assert_eq!(
            owner_from(0, Some("1000"), Some("1001")),
            Some((1000, 1001))
        );
        assert_eq!(
            owner_from(0, Some(" 65534 "), Some("65534")),
            Some((65534, 65534))
        );
        // Not root: files are created as this user already.
        assert_eq!(owner_from(1000, Some("1000"), Some("1000")), None);
        // Root without sudo, or sudo from root.
        assert_eq!(owner_from(0, None, None), None);
        assert_eq!(owner_from(0, Some(""), Some("")), None);
        assert_eq!(owner_from(0, Some("0"), Some("0")), None);
        // Not ids: left to root rather than guessed.
        assert_eq!(owner_from(0, Some("alice"), Some("1000")), None);
        assert_eq!(owner_from(0, Some("1000"), Some("staff")), None);
        // No SUDO_GID: the user's primary group from the user database
        // (uid 0 is root's in every passwd).
        assert_eq!(owner_from(0, Some("0"), None), None);
    }

    /// Catches the temporary file of a writer killed before its rename
    /// staying in the user's directory for good; a live writer's is kept.
    #[test]
    fn a_dead_writers_temporary_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = dir.path().join(format!(".out.json.tmp.{dead}"));
        let other = dir.path().join(format!(".other.json.tmp.{dead}"));
        for f in [&stale, &other] {
            fs::write(f, "partial").unwrap();
        }
        let live_keep = dir.path().join(".out.json.tmp.1");
        fs::write(&live_keep, "pid 1 runs").unwrap();
        write(&dir.path().join("out.json"), b"{}").unwrap();
        assert!(!stale.exists(), "dead writer's temporary kept");
        assert!(other.exists(), "another file's temporary removed");
        assert!(live_keep.exists(), "a live process's temporary removed");
    }

    /// Catches giving away directories that existed before, or missing the
    /// intermediate ones ttp created. Needs root to give files away.
    #[test]
    fn created_directories_are_given_away() {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED created_directories_are_given_away: needs root");
            return;
        }
        let top = tempfile::tempdir().unwrap();
        let deep = top.path().join("a/b/c");
        create_dir_all_as(&deep, Some((65534, 65534))).unwrap();
        for d in ["a", "a/b", "a/b/c"] {
            let m = fs::metadata(top.path().join(d)).unwrap();
            assert_eq!((m.uid(), m.gid()), (65534, 65534), "{d}");
        }
        assert_eq!(
            fs::metadata(top.path()).unwrap().uid(),
            0,
            "existing parent given away"
        );
    }
}
