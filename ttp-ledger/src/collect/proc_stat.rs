//! The overall measures of TTPv2 Sec. 3.6 from `/proc/stat`: the ten CPU
//! time fields (total and per CPU) and the system counters, read before and
//! after each query execution (`getOverall()`, Sec. 7.1 Fig. 5) and
//! subtracted.
use std::path::Path;

use procfs::{ExplicitSystemInfo, FromBufReadSI, KernelStats};
use serde::{Deserialize, Serialize};

use super::{ProcReadError, Regressions};

/// The ten CPU time fields of a `cpu` line of /proc/stat, in USER_HZ ticks.
/// The first four exist on every kernel; the others are `None` on kernels
/// too old to print them.
///
/// Note (kernel/sched/cputime.c): `guest` and `guest_nice` are also counted
/// in `user` and `nice`; `iowait` is idle time while tasks that last slept on
/// that CPU wait for block I/O, and the kernel warns it can decrease.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CpuTicks {
    pub user: Option<u64>,
    pub nice: Option<u64>,
    pub system: Option<u64>,
    pub idle: Option<u64>,
    pub iowait: Option<u64>,
    pub irq: Option<u64>,
    pub softirq: Option<u64>,
    pub steal: Option<u64>,
    pub guest: Option<u64>,
    pub guest_nice: Option<u64>,
}

type CpuField = (
    &'static str,
    fn(&CpuTicks) -> Option<u64>,
    fn(&mut CpuTicks) -> &mut Option<u64>,
);
const CPU_FIELDS: [CpuField; 10] = [
    ("user", |c| c.user, |c| &mut c.user),
    ("nice", |c| c.nice, |c| &mut c.nice),
    ("system", |c| c.system, |c| &mut c.system),
    ("idle", |c| c.idle, |c| &mut c.idle),
    ("iowait", |c| c.iowait, |c| &mut c.iowait),
    ("irq", |c| c.irq, |c| &mut c.irq),
    ("softirq", |c| c.softirq, |c| &mut c.softirq),
    ("steal", |c| c.steal, |c| &mut c.steal),
    ("guest", |c| c.guest, |c| &mut c.guest),
    ("guest_nice", |c| c.guest_nice, |c| &mut c.guest_nice),
];

impl CpuTicks {
    fn from_procfs(c: &procfs::CpuTime) -> CpuTicks {
        CpuTicks {
            user: Some(c.user),
            nice: Some(c.nice),
            system: Some(c.system),
            idle: Some(c.idle),
            iowait: c.iowait,
            irq: c.irq,
            softirq: c.softirq,
            steal: c.steal,
            guest: c.guest,
            guest_nice: c.guest_nice,
        }
    }

    /// All ten fields added up: the ticks this CPU (or all CPUs) accounted.
    /// Guest ticks are already inside user/nice, so they are left out.
    #[cfg(test)]
    pub(crate) fn accounted(&self) -> Option<u64> {
        [
            self.user,
            self.nice,
            self.system,
            self.idle,
            self.iowait,
            self.irq,
            self.softirq,
            self.steal,
        ]
        .into_iter()
        .try_fold(0u64, |acc, v| acc.checked_add(v?))
    }

    fn delta(before: &CpuTicks, after: &CpuTicks, regressions: &mut Regressions) -> CpuTicks {
        let mut d = CpuTicks::default();
        for (name, get, set) in CPU_FIELDS {
            *set(&mut d) = regressions.sub(name, get(before), get(after));
        }
        d
    }
}

/// One CPU's line of /proc/stat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuLine {
    /// The CPU number from the `cpuN` label (offline CPUs have no line, so
    /// the position in the file is not the CPU number).
    pub cpu: u32,
    pub ticks: CpuTicks,
}

/// What /proc/stat reports at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatImage {
    /// The `cpu` line: all online CPUs together.
    pub total: CpuTicks,
    /// The `cpuN` lines, ascending by CPU number.
    pub per_cpu: Vec<CpuLine>,
    /// Context switches since boot (`ctxt`).
    pub ctxt: u64,
    /// Forks since boot (`processes`).
    pub processes: u64,
    /// Runnable tasks now (`procs_running`); an instantaneous value.
    pub procs_running: Option<u64>,
    /// Tasks blocked on I/O now (`procs_blocked`); an instantaneous value.
    pub procs_blocked: Option<u64>,
    /// Boot time, seconds since the epoch (`btime`).
    pub btime_s: u64,
}

/// The change of /proc/stat between two images. `procs_running` and
/// `procs_blocked` are instantaneous, so they have no delta.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatDelta {
    pub total: CpuTicks,
    /// Per CPU present in both images.
    pub per_cpu: Vec<CpuLine>,
    pub ctxt: Option<u64>,
    pub processes: Option<u64>,
    /// Counters present in both images that decreased, as
    /// `"total.iowait"`, `"cpu1.idle"`, `"ctxt"`. iowait is the one the
    /// kernel allows to decrease (a task that slept on one CPU may wake on
    /// another).
    pub went_backwards: Vec<String>,
}

impl StatImage {
    /// Reads `<root>/stat` (normally /proc/stat).
    pub fn read(root: &Path) -> Result<StatImage, ProcReadError> {
        let path = root.join("stat");
        let text = std::fs::read_to_string(&path).map_err(|e| ProcReadError::Read {
            path: path.clone(),
            source: procfs::ProcError::Io(e, Some(path.clone())),
        })?;
        Self::parse(&text).map_err(|source| ProcReadError::Read { path, source })
    }

    /// Parses the text of /proc/stat.
    pub(crate) fn parse(text: &str) -> Result<StatImage, procfs::ProcError> {
        // Ticks per second only feed procfs's ms conversions, unused here.
        let info = ExplicitSystemInfo {
            boot_time_secs: 0,
            ticks_per_second: 100,
            page_size: 4096,
            is_little_endian: cfg!(target_endian = "little"),
        };
        let stats = KernelStats::from_buf_read(text.as_bytes(), &info)?;
        // procfs keeps the per-CPU lines in file order but drops their
        // labels; take the CPU numbers from the labels, in the same order.
        let ids: Vec<u32> = text
            .lines()
            .filter_map(|l| l.strip_prefix("cpu"))
            .filter(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
            .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
            .collect();
        if ids.len() != stats.cpu_time.len() {
            return Err(procfs::ProcError::Other(format!(
                "{} cpuN labels but {} per-CPU lines parsed",
                ids.len(),
                stats.cpu_time.len()
            )));
        }
        let mut per_cpu: Vec<CpuLine> = ids
            .into_iter()
            .zip(&stats.cpu_time)
            .map(|(cpu, t)| CpuLine {
                cpu,
                ticks: CpuTicks::from_procfs(t),
            })
            .collect();
        per_cpu.sort_by_key(|c| c.cpu);
        Ok(StatImage {
            total: CpuTicks::from_procfs(&stats.total),
            per_cpu,
            ctxt: stats.ctxt,
            processes: stats.processes,
            procs_running: stats.procs_running.map(u64::from),
            procs_blocked: stats.procs_blocked.map(u64::from),
            btime_s: stats.btime,
        })
    }

    /// `after - before`. CPUs present in only one image (hot-plugged in
    /// between) are left out; counters that decreased are `None` and named.
    pub fn delta(&self, after: &StatImage) -> StatDelta {
        let mut went_backwards = Vec::new();
        let mut r = Regressions::default();
        let total = CpuTicks::delta(&self.total, &after.total, &mut r);
        went_backwards.extend(r.0.drain(..).map(|n| format!("total.{n}")));
        let mut per_cpu = Vec::new();
        for b in &self.per_cpu {
            let Some(a) = after.per_cpu.iter().find(|a| a.cpu == b.cpu) else {
                continue;
            };
            let ticks = CpuTicks::delta(&b.ticks, &a.ticks, &mut r);
            went_backwards.extend(r.0.drain(..).map(|n| format!("cpu{}.{n}", b.cpu)));
            per_cpu.push(CpuLine { cpu: b.cpu, ticks });
        }
        let ctxt = r.sub("ctxt", Some(self.ctxt), Some(after.ctxt));
        let processes = r.sub("processes", Some(self.processes), Some(after.processes));
        went_backwards.extend(r.0.drain(..).map(String::from));
        StatDelta {
            total,
            per_cpu,
            ctxt,
            processes,
            went_backwards,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/proc")
    }

    #[test]
    fn reads_real_proc_stat() {
        // Values copied by hand from the fixture's first three lines.
        let s = StatImage::read(&fixture()).unwrap();
        assert_eq!(s.total.user, Some(20426));
        assert_eq!(s.total.system, Some(5445));
        assert_eq!(s.total.idle, Some(108_775));
        assert_eq!(s.total.iowait, Some(1057));
        assert_eq!(s.total.softirq, Some(143));
        assert_eq!(s.total.steal, Some(73));
        assert_eq!(s.total.guest_nice, Some(0));
        assert_eq!(s.per_cpu.len(), 2);
        assert_eq!(s.per_cpu[1].cpu, 1);
        assert_eq!(s.per_cpu[1].ticks.iowait, Some(935));
        assert_eq!(s.ctxt, 440_889);
        // The kernel sums the CPUs in ns and converts once for the `cpu`
        // line, but converts (truncating) each `cpuN` line on its own
        // (fs/proc/stat.c): the total is at least the sum of the per-CPU
        // ticks and less than one tick per CPU above it. Catches per-CPU
        // lines attached to the wrong CPU or a field shifted.
        let ncpus = s.per_cpu.len() as u64;
        for (name, get, _) in CPU_FIELDS {
            let sum: u64 = s.per_cpu.iter().map(|c| get(&c.ticks).unwrap()).sum();
            let total = get(&s.total).unwrap();
            assert!(
                total >= sum && total - sum < ncpus,
                "{name}: total {total}, sum {sum}"
            );
        }
    }

    #[test]
    fn cpu_numbers_come_from_labels() {
        // CPU 1 offline: /proc/stat skips it. Catches numbering CPUs by
        // position (cpu2 would be reported as cpu1).
        let text = "cpu  3 0 3 10 1 0 0 0 0 0\ncpu0 1 0 1 5 0 0 0 0 0 0\ncpu2 2 0 2 5 1 0 0 0 0 0\n\
                    ctxt 9\nbtime 1\nprocesses 4\nprocs_running 1\nprocs_blocked 0\n";
        let s = StatImage::parse(text).unwrap();
        let cpus: Vec<u32> = s.per_cpu.iter().map(|c| c.cpu).collect();
        assert_eq!(cpus, vec![0, 2]);
        assert_eq!(s.per_cpu[1].ticks.iowait, Some(1));
    }

    #[test]
    fn short_cpu_lines_are_absent_not_zero() {
        // A kernel printing only four fields (pre-2.5.41): catches defaulting
        // iowait and later fields to 0.
        let text = "cpu  3 0 3 10\ncpu0 3 0 3 10\nctxt 9\nbtime 1\nprocesses 4\n";
        let s = StatImage::parse(text).unwrap();
        assert_eq!(s.total.iowait, None);
        assert_eq!(s.total.guest_nice, None);
        assert_eq!(s.procs_running, None);
        assert_eq!(s.total.accounted(), None);
    }

    #[test]
    fn delta_refuses_to_go_backwards() {
        let before = StatImage::read(&fixture()).unwrap();
        let mut after = before.clone();
        after.total.user = Some(20426 + 50);
        after.per_cpu[0].ticks.idle = Some(55_674 + 7);
        after.per_cpu[1].ticks.iowait = Some(935 - 2); // iowait can decrease
        after.total.iowait = Some(1057 - 2);
        after.ctxt += 100;
        let d = before.delta(&after);
        assert_eq!(d.total.user, Some(50));
        assert_eq!(d.per_cpu[0].ticks.idle, Some(7));
        assert_eq!(d.per_cpu[0].ticks.user, Some(0));
        // Catches wrapping the decreased iowait to ~1.8e19.
        assert_eq!(d.per_cpu[1].ticks.iowait, None);
        assert_eq!(d.total.iowait, None);
        assert_eq!(
            d.went_backwards,
            vec!["total.iowait".to_string(), "cpu1.iowait".to_string()]
        );
        assert_eq!(d.ctxt, Some(100));
        assert_eq!(d.processes, Some(0));
    }
}
