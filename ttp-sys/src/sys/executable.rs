//! The executable a process runs, named so that ttp can open it and attach
//! uprobes to it. `/proc/PID/exe` reads as a path in the process's own
//! mount namespace: for a server in a container (or a chroot), that path
//! names another file, or none, in ttp's. The process's root,
//! `/proc/PID/root`, is a view of its own tree from ttp's side (the
//! kernel follows it into the process's mount namespace), so the path is
//! taken through it whenever the process does not see the files as ttp
//! does.
use std::path::{Path, PathBuf};

/// What `/proc/PID/exe` says of process `pid`'s executable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Executable {
    /// A path that names the file from ttp's side.
    Path(PathBuf),
    /// The file was replaced or removed since the process started (the
    /// link reads `… (deleted)`): the path as the process saw it.
    Replaced(PathBuf),
}

/// Process `pid`'s executable, through its root when it does not share
/// ttp's view of the files.
pub fn of_process(pid: u32) -> std::io::Result<Executable> {
    let link = std::fs::read_link(format!("/proc/{pid}/exe"))?;
    Ok(resolve(pid, &link, same_view(pid)))
}

/// Whether process `pid` sees the files as ttp does: the same mount
/// namespace and the same root. Unreadable (the process is gone, or
/// no permission): taken as the same, the plain path being the best
/// guess.
pub(crate) fn same_view(pid: u32) -> bool {
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/mnt")).ok();
    let root = |p: &str| std::fs::read_link(format!("/proc/{p}/root")).ok();
    let me = "self";
    let them = pid.to_string();
    let same = |a: Option<PathBuf>, b: Option<PathBuf>| match (a, b) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    };
    same(ns(me), ns(&them)) && same(root(me), root(&them))
}

/// The path that names `link` (what `/proc/PID/exe` reads) from ttp's
/// side: itself when the process sees the files as ttp does, else the
/// same path under `/proc/PID/root`.
pub(crate) fn resolve(pid: u32, link: &Path, same_view: bool) -> Executable {
    let s = link.to_string_lossy();
    let (path, replaced) = match s.strip_suffix(" (deleted)") {
        Some(p) => (PathBuf::from(p), true),
        None => (link.to_path_buf(), false),
    };
    let path = if same_view {
        path
    } else {
        let rel = path.strip_prefix("/").unwrap_or(&path);
        PathBuf::from(format!("/proc/{pid}/root")).join(rel)
    };
    if replaced {
        Executable::Replaced(path)
    } else {
        Executable::Path(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches the container's path used as ttp's, a path joined without
    /// its root (`/proc/PID/root` + an absolute path is that path), and a
    /// replaced file taken as present.
    #[test]
    fn paths_through_the_process_root() {
        let link = Path::new("/usr/lib/postgresql/16/bin/postgres");
        assert_eq!(
            resolve(42, link, true),
            Executable::Path(link.to_path_buf())
        );
        assert_eq!(
            resolve(42, link, false),
            Executable::Path("/proc/42/root/usr/lib/postgresql/16/bin/postgres".into())
        );
        assert_eq!(
            resolve(42, Path::new("/usr/bin/postgres (deleted)"), false),
            Executable::Replaced("/proc/42/root/usr/bin/postgres".into())
        );
        assert_eq!(
            resolve(42, Path::new("/usr/bin/postgres (deleted)"), true),
            Executable::Replaced("/usr/bin/postgres".into())
        );
    }

    /// This process shares its own view; its executable through its root
    /// is the same file (device and inode) as through the plain path.
    /// Catches a comparison that never says "same", and a path under the
    /// root that names another file.
    #[test]
    fn own_process_same_file_either_way() {
        use std::os::unix::fs::MetadataExt;
        let pid = std::process::id();
        assert!(same_view(pid));
        let Executable::Path(plain) = of_process(pid).unwrap() else {
            panic!("own executable replaced");
        };
        assert_eq!(plain, std::fs::read_link("/proc/self/exe").unwrap());
        let Executable::Path(rooted) = resolve(pid, &plain, false) else {
            panic!()
        };
        let (a, b) = (
            std::fs::metadata(&plain).unwrap(),
            std::fs::metadata(&rooted).unwrap(),
        );
        assert_eq!((a.dev(), a.ino()), (b.dev(), b.ino()));
    }
}
