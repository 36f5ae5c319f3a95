//! A sysctl set for the length of a measurement and put back afterwards.
//!
//! ttp turns `kernel.task_delayacct` on so the kernel measures block-I/O
//! delay (TTPv2's BlockIO delay, Sec. 3.5) and restores it afterwards; the
//! report says whether it changed anything. The guard restores on drop,
//! which runs on normal return, on `?` errors and on panics that unwind;
//! signal handlers must let the guard drop (end the command normally) rather
//! than exit the process.
use std::path::{Path, PathBuf};

/// Errors of the sysctl guard.
#[derive(Debug, thiserror::Error)]
pub enum SysctlError {
    #[error(
        "`{name}` is not a sysctl name (expected dotted lowercase words like kernel.task_delayacct)"
    )]
    BadName { name: String },
    #[error("sysctl {name} does not exist on this kernel ({}): {source}", path.display())]
    Missing {
        name: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot set sysctl {name} to {value}: {source}; run with sudo")]
    Write {
        name: String,
        value: String,
        #[source]
        source: std::io::Error,
    },
}

/// Sets a sysctl on creation and writes its previous value back on drop.
#[derive(Debug)]
pub struct SysctlGuard {
    name: String,
    path: PathBuf,
    previous: String,
    changed: bool,
}

impl SysctlGuard {
    /// Sets sysctl `name` (e.g. `kernel.task_delayacct`) under `sys_root`
    /// (normally `/proc/sys`) to `value`. Writes nothing when it already has
    /// that value.
    pub fn set(sys_root: &Path, name: &str, value: &str) -> Result<SysctlGuard, SysctlError> {
        let path = sysctl_path(sys_root, name)?;
        let previous = std::fs::read_to_string(&path)
            .map_err(|source| SysctlError::Missing {
                name: name.into(),
                path: path.clone(),
                source,
            })?
            .trim()
            .to_string();
        let value = value.trim().to_string();
        let changed = previous != value;
        if changed {
            std::fs::write(&path, format!("{value}\n")).map_err(|source| SysctlError::Write {
                name: name.into(),
                value: value.clone(),
                source,
            })?;
        }
        Ok(SysctlGuard {
            name: name.into(),
            path,
            previous,
            changed,
        })
    }

    /// Whether creating the guard changed the setting (and dropping it will
    /// change it back).
    pub fn changed(&self) -> bool {
        self.changed
    }

    /// The value before the guard was created.
    #[cfg(test)]
    pub(crate) fn previous(&self) -> &str {
        &self.previous
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Restores the previous value now, reporting failure (drop only logs it).
    #[cfg(test)]
    pub(crate) fn restore(mut self) -> Result<(), SysctlError> {
        let result = self.write_back();
        self.changed = false;
        result
    }

    fn write_back(&self) -> Result<(), SysctlError> {
        if !self.changed {
            return Ok(());
        }
        std::fs::write(&self.path, format!("{}\n", self.previous)).map_err(|source| {
            SysctlError::Write {
                name: self.name.clone(),
                value: self.previous.clone(),
                source,
            }
        })
    }
}

impl Drop for SysctlGuard {
    fn drop(&mut self) {
        if let Err(e) = self.write_back() {
            log::error!(
                "{e}; restore it by hand: sysctl -w {}={}",
                self.name,
                self.previous
            );
        }
    }
}

/// `kernel.task_delayacct` → `<sys_root>/kernel/task_delayacct`. Only
/// plain names are accepted, so the guard cannot be pointed outside
/// `sys_root`.
fn sysctl_path(sys_root: &Path, name: &str) -> Result<PathBuf, SysctlError> {
    let ok = !name.is_empty()
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        });
    if !ok {
        return Err(SysctlError::BadName { name: name.into() });
    }
    Ok(name
        .split('.')
        .fold(sys_root.to_path_buf(), |p, part| p.join(part)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(value: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("kernel")).unwrap();
        let file = dir.path().join("kernel/task_delayacct");
        std::fs::write(&file, value).unwrap();
        (dir, file)
    }

    #[test]
    fn sets_and_restores_on_drop() {
        // Catches a guard that forgets to restore, or restores the new value.
        let (dir, file) = tree("0\n");
        {
            let g = SysctlGuard::set(dir.path(), "kernel.task_delayacct", "1").unwrap();
            assert!(g.changed());
            assert_eq!(g.previous(), "0");
            assert_eq!(std::fs::read_to_string(&file).unwrap(), "1\n");
        }
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "0\n");
    }

    #[test]
    fn restores_on_panic() {
        // Catches restoring only on the normal path.
        let (dir, file) = tree("0\n");
        let root = dir.path().to_path_buf();
        let r = std::panic::catch_unwind(move || {
            let _g = SysctlGuard::set(&root, "kernel.task_delayacct", "1").unwrap();
            panic!("measurement failed");
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "0\n");
    }

    #[test]
    fn unchanged_value_is_left_alone() {
        // Already 1: the guard must say it changed nothing and not write on
        // drop (another tool may set it meanwhile).
        let (dir, file) = tree("1\n");
        let g = SysctlGuard::set(dir.path(), "kernel.task_delayacct", "1").unwrap();
        assert!(!g.changed());
        std::fs::write(&file, "0\n").unwrap();
        drop(g);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "0\n");
    }

    #[test]
    fn explicit_restore_reports() {
        let (dir, file) = tree("0\n");
        let g = SysctlGuard::set(dir.path(), "kernel.task_delayacct", "1").unwrap();
        g.restore().unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "0\n");
    }

    #[test]
    fn bad_or_missing_names() {
        let (dir, _) = tree("0\n");
        // Catches a name that escapes the sysctl tree.
        for name in [
            "",
            "kernel..x",
            "../etc/passwd",
            "kernel/task_delayacct",
            "a. b",
        ] {
            assert!(
                matches!(
                    SysctlGuard::set(dir.path(), name, "1"),
                    Err(SysctlError::BadName { .. })
                ),
                "{name}"
            );
        }
        assert!(matches!(
            SysctlGuard::set(dir.path(), "kernel.no_such_knob", "1"),
            Err(SysctlError::Missing { .. })
        ));
    }
}
