//! `serve --user`: the privileges serve gives up once the ledger is loaded
//! and attached (docs/serve.md, Security).
//!
//! Loading and attaching the programs needs CAP_BPF and CAP_PERFMON (or
//! CAP_SYS_ADMIN), switching the kernel's BPF statistics on CAP_SYS_ADMIN.
//! Everything serve does afterwards goes through file descriptors it
//! already holds (the maps, mmapped or read by bpf(2) on their fds; the
//! programs' fds for their statistics; the listening socket) or reads
//! files of /proc that every user may read. So once attached it becomes an
//! unprivileged user: the supplementary groups go, then the group id, then
//! the user id (from root, setuid(2) to another user clears every
//! capability: capabilities(7), "Effect of user ID changes"), and
//! no_new_privs (per thread: the main thread and the HTTP thread started
//! after it) keeps a later exec from gaining one back. Started by a
//! user other than root with capabilities of its own (file or ambient
//! capabilities), serve keeps them: capabilities belong to each thread,
//! the ledger's threads are already running, and glibc broadcasts only
//! the set*id calls to every thread, not capset(2).
use std::ffi::CString;

use ttp_sys::error::usage;

/// The user serve runs as when started as root and `--user` is not given.
pub(crate) const DEFAULT_USER: &str = "nobody";

/// The user (and its primary group) to become.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// What was done, for the line serve prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Dropped {
    /// Became this user, no capabilities left.
    ToUser(String),
    /// Started by a user other than root (with capabilities of its
    /// own): nothing changed.
    NotRoot,
    /// `--user root`: nothing dropped.
    Kept,
}

/// Looks `name` up in the user database (getpwnam_r); an unknown user is
/// a usage error, said before anything is loaded.
pub(crate) fn lookup(name: &str) -> anyhow::Result<Target> {
    let Ok(cname) = CString::new(name) else {
        return usage(format!("bad --user {name:?}"));
    };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: passwd is plain data; getpwnam_r fills it with pointers into
    // `buf`, which outlives every use below.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut out,
        )
    };
    if rc != 0 || out.is_null() {
        return usage(format!(
            "--user {name}: no such user on this machine; give an existing unprivileged user (default {DEFAULT_USER}) or create one (useradd --system ttp)"
        ));
    }
    Ok(Target {
        name: name.to_string(),
        uid: pwd.pw_uid,
        gid: pwd.pw_gid,
    })
}

fn os_err(what: &str) -> anyhow::Error {
    ttp_sys::error::UsageError::new(format!(
        "cannot drop privileges ({what}: {}); give serve CAP_SETUID and CAP_SETGID (the unit file does) or run it with --user root",
        std::io::Error::last_os_error()
    ))
    .into()
}

/// Gives up every privilege: becomes `target` when running as root (or
/// keeps root when `target` is root), sets no_new_privs, and checks in /proc/self/status that
/// no effective or permitted capability is left.
pub(crate) fn drop_privileges(target: &Target) -> anyhow::Result<Dropped> {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if target.uid == 0 {
        return Ok(Dropped::Kept);
    }
    let dropped = if euid == 0 {
        let groups = [target.gid];
        // SAFETY: plain system calls with a valid one-element array; glibc
        // applies set*id to every thread of the process.
        unsafe {
            if libc::setgroups(1, groups.as_ptr()) != 0 {
                return Err(os_err("setgroups"));
            }
            if libc::setresgid(target.gid, target.gid, target.gid) != 0 {
                return Err(os_err("setresgid"));
            }
            if libc::setresuid(target.uid, target.uid, target.uid) != 0 {
                return Err(os_err("setresuid"));
            }
        }
        Dropped::ToUser(target.name.clone())
    } else {
        // Capabilities are per thread and the ledger's threads already
        // run: a non-root serve cannot clear theirs from here.
        return Ok(Dropped::NotRoot);
    };
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(os_err("no_new_privs"));
    }
    let (eff, prm) = capability_sets()?;
    if eff != 0 || prm != 0 {
        return usage(format!(
            "capabilities left after dropping privileges (CapEff {eff:016x}, CapPrm {prm:016x}); stopping rather than serving with them"
        ));
    }
    Ok(dropped)
}

/// (CapEff, CapPrm) of this thread, from /proc/thread-self/status.
pub(crate) fn capability_sets() -> anyhow::Result<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/status")?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(u64::MAX)
    };
    Ok((field("CapEff:"), field("CapPrm:")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches an unknown user that is not a usage error, and a lookup
    /// that returns another user's ids.
    #[test]
    fn lookup_finds_root_and_refuses_strangers() {
        let root = lookup("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        let e = lookup("no-such-user-ttp-test").unwrap_err();
        assert_eq!(ttp_sys::error::exit_code(&e), 2);
        assert!(e.to_string().contains("no such user"), "{e}");
    }
}
