//! `--fix`: applies the fixes the check offered, and nothing else. These
//! are deliberate, persistent changes (until reboot): unlike a measurement,
//! which restores what it changes, `--fix` leaves them in place.
use std::{ffi::CString, fs, path::Path};

use super::{
    FixOutcome,
    item::{CheckItem, Fix},
    read::Root,
};

/// Applies every fix offered by `items` under `root`.
pub fn apply(root: &Path, items: &[CheckItem]) -> Vec<FixOutcome> {
    let r = Root(root.to_path_buf());
    items
        .iter()
        .filter_map(|i| {
            let f = i.fix.as_ref()?;
            Some(FixOutcome {
                item: i.id.clone(),
                action: f.describe(),
                error: apply_one(&r, f).err(),
            })
        })
        .collect()
}

fn write(r: &Root, rel: &str, value: &str) -> Result<(), String> {
    let p = r.path(rel);
    fs::write(&p, value).map_err(|e| format!("{}: {e}", p.display()))
}

fn apply_one(r: &Root, f: &Fix) -> Result<(), String> {
    match f {
        Fix::EnableDelayAccounting => write(r, "proc/sys/kernel/task_delayacct", "1"),
        Fix::GovernorPerformance { cpus } => cpus.iter().try_for_each(|c| {
            write(
                r,
                &format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"),
                "performance",
            )
        }),
        Fix::DisableTurbo { path, value } => write(r, path, value),
        Fix::MountTracefs => {
            let target = r.path("sys/kernel/tracing");
            let c = |s: &str| CString::new(s).map_err(|e| e.to_string());
            let (src, ty) = (c("nodev")?, c("tracefs")?);
            let tgt = c(&target.to_string_lossy())?;
            // SAFETY: all pointers are valid NUL-terminated strings; no data.
            let rc = unsafe {
                libc::mount(src.as_ptr(), tgt.as_ptr(), ty.as_ptr(), 0, std::ptr::null())
            };
            if rc == 0 {
                Ok(())
            } else {
                Err(format!(
                    "mount tracefs on {}: {}",
                    target.display(),
                    std::io::Error::last_os_error()
                ))
            }
        }
    }
}
