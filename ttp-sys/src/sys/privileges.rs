//! Whether this process may do what ttp needs, checked up front so the user
//! gets one line saying what to do instead of an EPERM from deep inside.
//!
//! Since Linux 5.8 loading tracing eBPF programs needs CAP_BPF and
//! CAP_PERFMON (`bpf_capable()`, `perfmon_capable()`), each of which
//! CAP_SYS_ADMIN also grants; taskstats commands need CAP_NET_ADMIN (the
//! kernel marks them GENL_ADMIN_PERM). The effective set is read from
//! `CapEff` in `/proc/self/status`.
use std::path::Path;

use procfs::FromRead;
use procfs::process::Status;

use crate::error::UsageError;

/// Capabilities ttp cares about, with their bit numbers
/// (include/uapi/linux/capability.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Capability {
    NetAdmin = 12,
    SysAdmin = 21,
    SysNice = 23,
    Perfmon = 38,
    Bpf = 39,
}

impl Capability {
    pub(crate) fn bit(self) -> u32 {
        self as u32
    }

    pub fn name(self) -> &'static str {
        match self {
            Capability::NetAdmin => "CAP_NET_ADMIN",
            Capability::SysAdmin => "CAP_SYS_ADMIN",
            Capability::SysNice => "CAP_SYS_NICE",
            Capability::Perfmon => "CAP_PERFMON",
            Capability::Bpf => "CAP_BPF",
        }
    }
}

/// The effective user id and capability set of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Privileges {
    pub euid: u32,
    /// `CapEff` as a bit set.
    pub cap_eff: u64,
}

impl Privileges {
    /// Reads `<proc_root>/self/status` (normally /proc/self/status).
    pub fn read(proc_root: &Path) -> Result<Privileges, UsageError> {
        let path = proc_root.join("self/status");
        let status = Status::from_file(&path).map_err(|e| {
            UsageError::new(format!(
                "cannot read {} to check privileges ({e}); is /proc mounted?",
                path.display()
            ))
        })?;
        Ok(Privileges {
            euid: status.euid,
            cap_eff: status.capeff,
        })
    }

    pub(crate) fn has(&self, cap: Capability) -> bool {
        self.cap_eff & (1u64 << cap.bit()) != 0
    }

    /// Ok if eBPF tracing programs can be loaded and attached: CAP_BPF and
    /// CAP_PERFMON, or CAP_SYS_ADMIN in their place.
    pub fn require_bpf(&self) -> Result<(), UsageError> {
        let missing: Vec<Capability> = [Capability::Bpf, Capability::Perfmon]
            .into_iter()
            .filter(|&c| !self.has(c) && !self.has(Capability::SysAdmin))
            .collect();
        self.require(&missing, "load its eBPF programs")
    }

    /// Ok if taskstats can be queried and its exit records received.
    pub fn require_taskstats(&self) -> Result<(), UsageError> {
        let missing: Vec<Capability> = [Capability::NetAdmin]
            .into_iter()
            .filter(|&c| !self.has(c))
            .collect();
        self.require(&missing, "read taskstats")
    }

    fn require(&self, missing: &[Capability], what: &str) -> Result<(), UsageError> {
        if missing.is_empty() {
            return Ok(());
        }
        let names = missing
            .iter()
            .map(|c| format!("{} ({})", c.name(), c.bit()))
            .collect::<Vec<_>>()
            .join(" and ");
        Err(UsageError::new(if self.euid != 0 {
            format!("ttp-ebpf needs root to {what}: run it with sudo (missing {names})")
        } else {
            format!(
                "running as root but without {names} in the effective capability set, needed to \
                 {what}; a container usually drops them: grant them (e.g. docker run --cap-add \
                 BPF --cap-add PERFMON --cap-add NET_ADMIN) or run on the host"
            )
        }))
    }
}

/// Checks this process can load eBPF programs; the error says what to do.
pub fn require_bpf() -> Result<(), UsageError> {
    Privileges::read(Path::new("/proc"))?.require_bpf()
}

/// Whether this process may give its threads a real-time policy.
pub fn may_use_realtime() -> bool {
    Privileges::read(Path::new("/proc")).is_ok_and(|p| p.has(Capability::SysNice))
}

/// Checks this process can use taskstats; the error says what to do.
pub fn require_taskstats() -> Result<(), UsageError> {
    Privileges::read(Path::new("/proc"))?.require_taskstats()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/caps")
            .join(name)
    }

    #[test]
    fn root_with_full_set() {
        // CapEff 000001fffeffffff copied from a root shell on the test machine.
        let p = Privileges::read(&fixture("root")).unwrap();
        assert_eq!(
            p,
            Privileges {
                euid: 0,
                cap_eff: 0x0000_01ff_feff_ffff
            }
        );
        assert!(
            p.has(Capability::Bpf) && p.has(Capability::Perfmon) && p.has(Capability::SysAdmin)
        );
        p.require_bpf().unwrap();
        p.require_taskstats().unwrap();
    }

    #[test]
    fn unprivileged_user_is_told_to_use_sudo() {
        // Catches a message that does not say what to do.
        let p = Privileges::read(&fixture("user")).unwrap();
        assert_eq!(p.euid, 65534);
        let msg = p.require_bpf().unwrap_err().to_string();
        assert!(msg.contains("run it with sudo"), "{msg}");
        assert!(
            msg.contains("CAP_BPF (39)") && msg.contains("CAP_PERFMON (38)"),
            "{msg}"
        );
        let msg = p.require_taskstats().unwrap_err().to_string();
        assert!(
            msg.contains("sudo") && msg.contains("CAP_NET_ADMIN (12)"),
            "{msg}"
        );
    }

    #[test]
    fn root_in_a_container_is_told_which_capability() {
        // Real status of a root shell with CAP_BPF, CAP_PERFMON and
        // CAP_SYS_ADMIN dropped (capsh --drop). Catches telling root to use
        // sudo, and testing bit 39 against the wrong word.
        let p = Privileges::read(&fixture("container")).unwrap();
        assert_eq!(p.cap_eff, 0x0000_013f_fedf_ffff);
        assert!(
            !p.has(Capability::Bpf) && !p.has(Capability::SysAdmin) && p.has(Capability::NetAdmin)
        );
        let msg = p.require_bpf().unwrap_err().to_string();
        assert!(
            !msg.contains("sudo") && msg.contains("CAP_BPF (39)"),
            "{msg}"
        );
        p.require_taskstats().unwrap();
    }

    #[test]
    fn sys_admin_stands_in_for_bpf_and_perfmon() {
        // Kernels before 5.8 know only CAP_SYS_ADMIN; it still grants both.
        let p = Privileges {
            euid: 0,
            cap_eff: 1 << 21,
        };
        p.require_bpf().unwrap();
        let p = Privileges {
            euid: 0,
            cap_eff: 1 << 39,
        };
        let msg = p.require_bpf().unwrap_err().to_string();
        assert!(
            msg.contains("CAP_PERFMON") && !msg.contains("CAP_BPF"),
            "{msg}"
        );
    }
}
