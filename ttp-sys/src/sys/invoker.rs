//! The user who ran ttp. Under `sudo` the tool runs as root, but the
//! program it measures should run as the person who typed the command (their
//! files, their environment, no root-only shortcuts); sudo records that
//! person in SUDO_UID, SUDO_GID and SUDO_USER. Without sudo it is the
//! current (real) user.
use std::ffi::{CStr, CString};

/// Errors finding the invoking user.
#[derive(Debug, thiserror::Error)]
pub enum InvokerError {
    #[error(
        "environment variable {name}={value:?} is not a numeric id; unset it or run through sudo"
    )]
    BadVar { name: &'static str, value: String },
    #[error("SUDO_UID={uid} has no SUDO_GID and no entry in the user database; set SUDO_GID")]
    NoGroup { uid: u32 },
}

/// Who invoked ttp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invoker {
    pub uid: u32,
    pub gid: u32,
    /// Login name, when known (needed for supplementary groups).
    pub user: Option<String>,
    /// Whether it came from sudo's variables.
    pub via_sudo: bool,
}

impl Invoker {
    /// From SUDO_UID / SUDO_GID / SUDO_USER, else the current real user.
    pub fn detect() -> Result<Invoker, InvokerError> {
        let var = |n| std::env::var(n).ok();
        Self::from_vars(
            var("SUDO_UID").as_deref(),
            var("SUDO_GID").as_deref(),
            var("SUDO_USER").as_deref(),
        )
    }

    /// As [`detect`](Self::detect), from the given values of SUDO_UID,
    /// SUDO_GID and SUDO_USER. Missing SUDO_GID / SUDO_USER are looked up in
    /// the user database.
    pub fn from_vars(
        sudo_uid: Option<&str>,
        sudo_gid: Option<&str>,
        sudo_user: Option<&str>,
    ) -> Result<Invoker, InvokerError> {
        let Some(uid) = sudo_uid.filter(|s| !s.is_empty()) else {
            return Ok(Self::current());
        };
        let parse = |name: &'static str, v: &str| {
            v.trim().parse::<u32>().map_err(|_| InvokerError::BadVar {
                name,
                value: v.to_string(),
            })
        };
        let uid = parse("SUDO_UID", uid)?;
        let entry = passwd_by_uid(uid);
        let gid = match sudo_gid.filter(|s| !s.is_empty()) {
            Some(g) => parse("SUDO_GID", g)?,
            None => entry
                .as_ref()
                .map(|e| e.1)
                .ok_or(InvokerError::NoGroup { uid })?,
        };
        let user = sudo_user
            .filter(|s| !s.is_empty())
            .map(String::from)
            .or(entry.map(|e| e.0));
        Ok(Invoker {
            uid,
            gid,
            user,
            via_sudo: true,
        })
    }

    /// The current real user and group.
    pub(crate) fn current() -> Invoker {
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Invoker {
            uid,
            gid,
            user: passwd_by_uid(uid).map(|e| e.0),
            via_sudo: false,
        }
    }

    /// Whether running a command as this user needs no change of
    /// credentials (it is who the process already runs as).
    pub fn is_effective_user(&self) -> bool {
        // SAFETY: geteuid/getegid cannot fail.
        unsafe { self.uid == libc::geteuid() && self.gid == libc::getegid() }
    }

    /// Supplementary groups of the user (getgrouplist), always including the
    /// primary group; just the primary group when the name is unknown.
    pub fn groups(&self) -> Vec<u32> {
        let Some(name) = self.user.as_deref().and_then(|u| CString::new(u).ok()) else {
            return vec![self.gid];
        };
        let mut n: libc::c_int = 32;
        loop {
            let mut groups = vec![0 as libc::gid_t; usize::try_from(n).unwrap_or(32)];
            let mut count = n;
            // SAFETY: `groups` has room for `count` entries; getgrouplist
            // writes at most that many and updates `count`.
            let rc = unsafe {
                libc::getgrouplist(name.as_ptr(), self.gid, groups.as_mut_ptr(), &mut count)
            };
            if rc >= 0 {
                groups.truncate(usize::try_from(count).unwrap_or(0));
                return groups;
            }
            if count <= n || n > 65_536 {
                return vec![self.gid];
            }
            n = count;
        }
    }
}

/// (name, primary gid) of `uid` from the user database.
fn passwd_by_uid(uid: u32) -> Option<(String, u32)> {
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: passwd is plain old data; getpwuid_r fills it with pointers
    // into `buf`, which outlives their use below.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the given lengths.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() || pwd.pw_name.is_null() {
        return None;
    }
    // SAFETY: pw_name points to a NUL-terminated string inside `buf`.
    let name = unsafe { CStr::from_ptr(pwd.pw_name) }
        .to_string_lossy()
        .into_owned();
    Some((name, pwd.pw_gid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sudo_variables_win() {
        // Catches ignoring sudo and running the workload as root.
        let i = Invoker::from_vars(Some("1000"), Some("1001"), Some("alice")).unwrap();
        assert_eq!(
            i,
            Invoker {
                uid: 1000,
                gid: 1001,
                user: Some("alice".into()),
                via_sudo: true
            }
        );
    }

    #[test]
    fn missing_gid_and_name_come_from_the_user_database() {
        // uid 65534 is `nobody:x:65534:65534` in /etc/passwd on Debian.
        let i = Invoker::from_vars(Some("65534"), None, None).unwrap();
        assert_eq!(
            (i.uid, i.gid, i.user.as_deref()),
            (65534, 65534, Some("nobody"))
        );
        assert_eq!(i.groups(), vec![65534]);
    }

    #[test]
    fn no_sudo_means_current_user() {
        let i = Invoker::from_vars(None, None, None).unwrap();
        // SAFETY: getuid cannot fail.
        assert_eq!(i.uid, unsafe { libc::getuid() });
        assert!(!i.via_sudo);
        assert!(Invoker::from_vars(Some(""), None, None).unwrap() == i);
    }

    #[test]
    fn bad_values_are_errors() {
        // Catches parsing garbage as uid 0 (root).
        let e = Invoker::from_vars(Some("alice"), Some("1"), None).unwrap_err();
        assert!(matches!(
            e,
            InvokerError::BadVar {
                name: "SUDO_UID",
                ..
            }
        ));
        let e = Invoker::from_vars(Some("1000"), Some("x"), None).unwrap_err();
        assert!(matches!(
            e,
            InvokerError::BadVar {
                name: "SUDO_GID",
                ..
            }
        ));
        // No such uid in the database and no SUDO_GID: cannot guess a group.
        let e = Invoker::from_vars(Some("3999999"), None, None).unwrap_err();
        assert!(matches!(e, InvokerError::NoGroup { uid: 3_999_999 }));
    }
}
