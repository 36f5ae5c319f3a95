//! Facts about the machine for reports (TTPv2 Sec. 9: CPU, memory, disk,
//! OS, kernel, HZ, virtualisation), read from /proc and /sys like the rest
//! of `collect`.
use std::path::Path;

use serde::{Deserialize, Serialize};

use ttp_sys::sys::setup_check::read::parse_cpu_list;

/// Facts about the machine and the setup of the measurement, collected by
/// the `run` command (Sec. 9 (2), (3), (6)).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineFacts {
    /// Measuring tool and version, e.g. "ttp-ebpf 0.1.0".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
    /// Online CPUs (the paper enabled one, Sec. 3.4): the CPUs the overall
    /// /proc/stat counters sum over, whatever ttp's own affinity or cgroup
    /// (see [`online_cpus`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<u32>,
    /// The CPUs ttp — and the query it starts, which inherits them — may
    /// run on, when fewer than the online CPUs (`taskset`, cpusets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity_cpus: Option<Vec<u32>>,
    /// The tightest cgroup CPU bandwidth limit (v2 `cpu.max`, v1
    /// `cpu.cfs_quota_us`) over ttp's cgroup and its ancestors, inherited
    /// by the query it starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_cpu_limit: Option<CgroupCpuLimit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Disk the measured data lives on, e.g. "virtio vda 20 GiB".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<String>,
    /// Distribution, e.g. "Debian GNU/Linux 13 (trixie)".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// CONFIG_HZ: the kernel's accounting tick rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hz: Option<u32>,
    /// USER_HZ: the tick rate of the /proc counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_hz: Option<u32>,
    /// Hypervisor, e.g. "kvm"; `None` on bare metal or when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtualization: Option<String>,
    /// Delay accounting (kernel.task_delayacct) was off and switched on for
    /// the measurement.
    #[serde(default)]
    pub delay_accounting_switched_on: bool,
    /// Page cache dropped before each QE (Sec. 3.1); `None`: not stated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_cache: Option<bool>,
    /// TTPv2 Step 0 (Sec. 8.1) as `ttp-ebpf check` found it before the
    /// first QE (schema `ttp.check/1`); the paragraph names its warnings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_check: Option<ttp_sys::sys::setup_check::CheckReport>,
    /// Further deviations from the protocol (daemons left running, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deviations: Vec<String>,
}

/// A cgroup CPU quota that limits CPU time (v2 `cpu.max`, v1
/// `cpu.cfs_quota_us` and `cpu.cfs_period_us`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CgroupCpuLimit {
    /// The cgroup that sets it, e.g. "/user.slice/limited".
    pub cgroup: String,
    pub quota_us: u64,
    pub period_us: u64,
}

impl CgroupCpuLimit {
    /// The limit in CPUs' worth of time (quota / period).
    pub fn cpus(&self) -> f64 {
        self.quota_us as f64 / self.period_us.max(1) as f64
    }
}

/// The online CPUs, which the aggregate `cpu` line of /proc/stat sums over
/// (TTPv2 eq. 1 and QE6/QE7 compare with it): the list in
/// `sys/devices/system/cpu/online` under `root`, else
/// sysconf(_SC_NPROCESSORS_ONLN). Not `available_parallelism()`, which
/// shrinks with ttp's affinity mask and cgroup quota while /proc/stat does
/// not.
pub fn online_cpus(root: &Path) -> Option<u32> {
    let listed = online_cpu_list(root)
        .map(|l| l.len() as u32)
        .filter(|&n| n > 0);
    listed.or_else(|| {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        u32::try_from(n).ok().filter(|&n| n > 0)
    })
}

/// The online CPUs listed in `sys/devices/system/cpu/online` under `root`.
pub(crate) fn online_cpu_list(root: &Path) -> Option<Vec<u32>> {
    std::fs::read_to_string(root.join("sys/devices/system/cpu/online"))
        .ok()
        .and_then(|s| parse_cpu_list(&s))
}

/// The online CPUs that `Cpus_allowed_list` of a /proc/PID/status text
/// allows, when they are fewer than the online CPUs; `None` when the mask
/// covers every online CPU (a mask may also name CPUs that are offline).
pub(crate) fn restricted_affinity(status: &str, online: &[u32]) -> Option<Vec<u32>> {
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(parse_cpu_list)?;
    let usable: Vec<u32> = online
        .iter()
        .copied()
        .filter(|c| allowed.contains(c))
        .collect();
    (!allowed.is_empty() && usable.len() < online.len()).then_some(usable)
}

/// The tightest CPU bandwidth limit over ttp's cgroup and its ancestors,
/// from a /proc/PID/cgroup text, under `cgroup_root` (/sys/fs/cgroup):
/// cgroup v2 `cpu.max` ("50000 100000"; "max" is no limit) on the unified
/// hierarchy — `cgroup_root` itself, or `cgroup_root/unified` on a hybrid
/// system — and cgroup v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us` (−1 is
/// no limit) on the hierarchy that holds the `cpu` controller. `None` when
/// no level sets a quota.
pub(crate) fn cgroup_cpu_limit(cgroup_root: &Path, proc_cgroup: &str) -> Option<CgroupCpuLimit> {
    let mut found = Vec::new();
    for line in proc_cgroup.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(ctrls), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if ctrls.is_empty() {
            let base = if cgroup_root.join("cgroup.controllers").exists() {
                cgroup_root.to_path_buf()
            } else {
                cgroup_root.join("unified")
            };
            found.extend(levels(&base, path.trim(), read_cpu_max));
        } else if ctrls.split(',').any(|c| c == "cpu") {
            found.extend(levels(&cgroup_root.join(ctrls), path.trim(), read_cfs));
        }
    }
    found
        .into_iter()
        .min_by(|a, b| a.cpus().total_cmp(&b.cpus()))
}

/// The limits set at `path` and each ancestor under `base`.
fn levels(base: &Path, path: &str, read: fn(&Path) -> Option<(u64, u64)>) -> Vec<CgroupCpuLimit> {
    let mut out = Vec::new();
    let mut here = Some(Path::new(path));
    while let Some(dir) = here {
        let rel = dir.strip_prefix("/").unwrap_or(dir);
        if let Some((quota_us, period_us)) = read(&base.join(rel)) {
            out.push(CgroupCpuLimit {
                cgroup: dir.display().to_string(),
                quota_us,
                period_us,
            });
        }
        here = dir.parent();
    }
    out
}

fn read_cpu_max(dir: &Path) -> Option<(u64, u64)> {
    let t = std::fs::read_to_string(dir.join("cpu.max")).ok()?;
    let mut it = t.split_whitespace();
    let quota = it.next()?.parse::<u64>().ok()?; // "max": no limit
    Some((quota, it.next()?.parse().ok()?))
}

fn read_cfs(dir: &Path) -> Option<(u64, u64)> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let quota = read("cpu.cfs_quota_us")?.trim().parse::<i64>().ok()?;
    let period = read("cpu.cfs_period_us")?.trim().parse::<u64>().ok()?;
    Some((u64::try_from(quota).ok()?, period)) // −1: no limit
}

fn first_value(text: &str, key: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// Reads what it can; every field may be absent.
pub fn facts() -> MachineFacts {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let os = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string());
    let memory_bytes = first_value(&meminfo, "MemTotal:")
        .and_then(|v| {
            v.split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
        })
        .map(|kib| kib * 1024);
    let cores = online_cpus(Path::new("/"));
    let affinity_cpus = online_cpu_list(Path::new("/")).and_then(|online| {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        restricted_affinity(&status, &online)
    });
    let cgroup_cpu_limit = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|c| cgroup_cpu_limit(Path::new("/sys/fs/cgroup"), &c));
    let virtualization = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .filter(|l| l.split_whitespace().any(|f| f == "hypervisor"))
        .map(|_| {
            let vendor = std::fs::read_to_string("/sys/class/dmi/id/sys_vendor").ok();
            match vendor
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
            {
                Some(v) => format!("virtual machine ({v})"),
                None => "virtual machine (CPU hypervisor flag)".to_string(),
            }
        });
    MachineFacts {
        tool: Some(format!("ttp-ebpf {}", env!("CARGO_PKG_VERSION"))),
        cpu_model: first_value(&cpuinfo, "model name"),
        cores,
        affinity_cpus,
        cgroup_cpu_limit,
        memory_bytes,
        disk: disks(),
        os,
        kernel,
        config_hz: super::clock::kernel_hz(Path::new("/proc"), Path::new("/boot"))
            .map(|k| k.hz as u32),
        user_hz: super::clock::user_hz().map(|h| h as u32),
        virtualization,
        ..Default::default()
    }
}

/// Block devices that are disks (not partitions, loop or ram devices),
/// with their size.
fn disks() -> Option<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/sys/block").ok()?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("loop") || name.starts_with("ram") || name.starts_with("zram") {
            continue;
        }
        let sectors: u64 = std::fs::read_to_string(e.path().join("size"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        let rotational = std::fs::read_to_string(e.path().join("queue/rotational")).ok();
        let kind = match rotational.as_deref().map(str::trim) {
            Some("1") => "rotational",
            Some("0") => "non-rotational",
            _ => "unknown kind",
        };
        out.push(format!(
            "{name} ({:.0} GB, {kind})",
            sectors as f64 * 512.0 / 1e9
        ));
    }
    (!out.is_empty()).then(|| out.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("ttp-machine-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// The CPU count is the online list (what /proc/stat sums over), not
    /// the affinity mask. Catches `available_parallelism()`, which under
    /// `taskset -c 0` on two CPUs says 1.
    #[test]
    fn online_cpus_come_from_the_online_list() {
        let root = tree("online");
        write(&root, "sys/devices/system/cpu/online", "0-1,4-5\n");
        assert_eq!(online_cpus(&root), Some(4));
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// Pinned when the mask allows fewer than the online CPUs. Catches a
    /// full mask reported as pinning, a mask on a 1-CPU machine, or a mask
    /// counted with its offline CPUs.
    #[test]
    fn affinity_is_reported_only_when_smaller_than_online() {
        let st = "Name:\tttp\nCpus_allowed:\t1\nCpus_allowed_list:\t0\n";
        assert_eq!(restricted_affinity(st, &[0, 1]), Some(vec![0]));
        assert_eq!(restricted_affinity(st, &[0]), None);
        let all = "Cpus_allowed_list:\t0-1\n";
        assert_eq!(restricted_affinity(all, &[0, 1]), None);
        assert_eq!(restricted_affinity("Name: x\n", &[0, 1]), None);
        // A mask of every possible CPU covers the online ones; a mask of
        // two CPUs, one of them offline, pins to the other.
        let possible = "Cpus_allowed_list:\t0-7\n";
        assert_eq!(restricted_affinity(possible, &[0, 1]), None);
        let half_offline = "Cpus_allowed_list:\t0,5\n";
        assert_eq!(restricted_affinity(half_offline, &[0, 1]), Some(vec![0]));
    }

    /// The tightest quota over the cgroup and its ancestors: 0.5 CPU at
    /// /a, none ("max") at /a/b, 1.5 CPUs at the root. Catches reading
    /// only the leaf (no limit) or taking the first limit found.
    #[test]
    fn cgroup_limit_is_the_tightest_ancestor() {
        let root = tree("cgroup");
        write(&root, "cgroup.controllers", "cpu memory\n");
        write(&root, "cpu.max", "150000 100000\n");
        write(&root, "a/cpu.max", "50000 100000\n");
        write(&root, "a/b/cpu.max", "max 100000\n");
        let l = cgroup_cpu_limit(&root, "0::/a/b\n").unwrap();
        assert_eq!(
            (l.cgroup.as_str(), l.quota_us, l.period_us),
            ("/a", 50_000, 100_000)
        );
        assert_eq!(l.cpus(), 0.5);
        write(&root, "a/cpu.max", "max 100000\n");
        write(&root, "cpu.max", "max 100000\n");
        assert_eq!(cgroup_cpu_limit(&root, "0::/a/b\n"), None);
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// A hybrid system (v2 under unified/, `cpu` on v1): the v1 quota of
    /// 0.25 CPU at /a counts, its root's −1 does not, and the unified
    /// hierarchy is read under unified/. Catches v1 quotas ignored, −1
    /// taken as a limit, or v2 read from the wrong directory.
    #[test]
    fn cgroup_v1_and_hybrid_limits_are_read() {
        let root = tree("cgroup-v1");
        write(&root, "cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
        write(&root, "cpu,cpuacct/cpu.cfs_period_us", "100000\n");
        write(&root, "cpu,cpuacct/a/cpu.cfs_quota_us", "25000\n");
        write(&root, "cpu,cpuacct/a/cpu.cfs_period_us", "100000\n");
        write(&root, "unified/u/cpu.max", "75000 100000\n");
        let proc = "4:cpu,cpuacct:/a\n3:memory:/m\n0::/u\n";
        let l = cgroup_cpu_limit(&root, proc).unwrap();
        assert_eq!((l.cgroup.as_str(), l.cpus()), ("/a", 0.25));
        let l = cgroup_cpu_limit(&root, "4:cpu,cpuacct:/\n0::/u\n").unwrap();
        assert_eq!((l.cgroup.as_str(), l.cpus()), ("/u", 0.75));
        assert_eq!(cgroup_cpu_limit(&root, "4:cpu,cpuacct:/\n"), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
