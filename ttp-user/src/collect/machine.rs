//! Facts about the machine for reports (TTPv2 Sec. 9: CPU, memory, disk,
//! OS, kernel, HZ, virtualisation), read from /proc and /sys like the rest
//! of `collect`.
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Facts about the machine and the setup of the measurement, collected by
/// the `run` command (Sec. 9 (2), (3), (6)).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineFacts {
    /// Measuring tool and version, e.g. "ttp-ebpf 0.1.0".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
    /// Online CPUs (the paper enabled one, Sec. 3.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<u32>,
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
    /// Further deviations from the protocol (daemons left running, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deviations: Vec<String>,
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
    let cores = std::thread::available_parallelism()
        .ok()
        .map(|n| n.get() as u32);
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
