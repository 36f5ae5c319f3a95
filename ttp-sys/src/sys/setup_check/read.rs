//! Readers of the machine's state under a root path (`/` live, a fixture
//! tree in tests). Each returns `None` when the file is absent or
//! unreadable: absent is not zero.
use std::{collections::BTreeMap, fs, io::Read, path::PathBuf};

pub(crate) struct Root(pub PathBuf);

impl Root {
    pub fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel.trim_start_matches('/'))
    }

    pub fn read(&self, rel: &str) -> Option<String> {
        fs::read_to_string(self.path(rel)).ok()
    }

    /// First line, trimmed.
    pub(crate) fn line(&self, rel: &str) -> Option<String> {
        self.read(rel)
            .map(|s| s.lines().next().unwrap_or("").trim().to_string())
    }

    pub(crate) fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }

    /// The kernel configuration: /proc/config.gz, else
    /// /boot/config-<release>. `None` when neither can be read.
    pub(crate) fn kernel_config(
        &self,
        release: Option<&str>,
    ) -> Option<(String, BTreeMap<String, String>)> {
        let gz = self.path("proc/config.gz");
        let text = fs::File::open(&gz)
            .ok()
            .and_then(|f| {
                let mut s = String::new();
                flate2::read::GzDecoder::new(f)
                    .read_to_string(&mut s)
                    .ok()
                    .map(|_| s)
            })
            .map(|s| ("/proc/config.gz".to_string(), s))
            .or_else(|| {
                let rel = format!("boot/config-{}", release?);
                self.read(&rel).map(|s| (format!("/{rel}"), s))
            })?;
        Some((text.0, parse_kconfig(&text.1)))
    }

    /// Numeric entries of /proc.
    pub(crate) fn pids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = fs::read_dir(self.path("proc"))
            .map(|it| {
                it.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        v.sort_unstable();
        v
    }
}

/// `CONFIG_X=value` lines; `# CONFIG_X is not set` is left out.
pub(crate) fn parse_kconfig(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            k.starts_with("CONFIG_")
                .then(|| (k.to_string(), v.trim_matches('"').to_string()))
        })
        .collect()
}

/// (major, minor) of a release string such as `6.18.44-fc-v769`.
pub(crate) fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// A CPU list such as `0-3,6,8-9`.
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<u32>().ok()?..=b.parse::<u32>().ok()?),
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

/// The aggregate `cpu` line of /proc/stat, in USER_HZ ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CpuTicks {
    pub total: u64,
    pub steal: u64,
}

pub(crate) fn parse_proc_stat(text: &str) -> Option<CpuTicks> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal [guest guest_nice]:
    // guest time is already counted in user, so the total stops at steal.
    let total = v.iter().take(8).sum();
    Some(CpuTicks {
        total,
        steal: v.get(7).copied().unwrap_or(0),
    })
}

/// One process from /proc/<pid>/stat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcSample {
    pub pid: u32,
    pub comm: String,
    pub start_ticks: u64,
    /// utime + stime, USER_HZ ticks.
    pub cpu_ticks: u64,
}

/// Parses /proc/<pid>/stat (the name may hold spaces and parentheses: it
/// ends at the last ')').
pub(crate) fn parse_pid_stat(pid: u32, text: &str) -> Option<ProcSample> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // rest[0] is field 3 (state); utime = field 14, stime = 15, starttime = 22.
    let f = |n: usize| rest.get(n - 3)?.parse::<u64>().ok();
    Some(ProcSample {
        pid,
        comm,
        start_ticks: f(22)?,
        cpu_ticks: f(14)? + f(15)?,
    })
}

/// Every process's sample (processes that vanish while reading are skipped).
pub(crate) fn processes(root: &Root) -> Vec<ProcSample> {
    root.pids()
        .into_iter()
        .filter_map(|pid| parse_pid_stat(pid, &root.read(&format!("proc/{pid}/stat"))?))
        .collect()
}

/// Mount points of a file-system type from /proc/mounts.
pub(crate) fn mounts_of(root: &Root, fstype: &str) -> Vec<String> {
    root.read("proc/mounts")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2) == Some(&fstype)).then(|| f.get(1).map(|s| s.to_string()))?
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a comm with ") " inside shifting the fields (below's
    /// `((bash process)` case).
    #[test]
    fn pid_stat_with_parentheses_in_the_name() {
        let s = "42 ((sd) x) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 12345 0 0";
        let p = parse_pid_stat(42, s).unwrap();
        assert_eq!(
            (p.comm.as_str(), p.cpu_ticks, p.start_ticks),
            ("(sd) x", 10, 12345)
        );
    }

    /// Catches guest time counted twice or steal read from the wrong column.
    #[test]
    fn proc_stat_steal_and_total() {
        let t = parse_proc_stat("cpu  100 0 50 800 10 0 5 35 20 0\ncpu0 1 2 3\n").unwrap();
        assert_eq!(
            t,
            CpuTicks {
                total: 1000,
                steal: 35
            }
        );
    }

    #[test]
    fn cpu_lists_and_versions() {
        assert_eq!(
            parse_cpu_list("0-3,6,8-9\n"),
            Some(vec![0, 1, 2, 3, 6, 8, 9])
        );
        assert_eq!(kernel_version("6.18.44-fc-v769"), Some((6, 18)));
        assert_eq!(kernel_version("2.6.32-358.el6"), Some((2, 6)));
    }
}
