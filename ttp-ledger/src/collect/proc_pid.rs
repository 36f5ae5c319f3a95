//! Per-process and per-thread images from `/proc/<pid>` and
//! `/proc/<pid>/task/<tid>`: the per-process measures of TTPv2 Sec. 3.5
//! (utime, stime, guest and children's guest time, minor and major faults,
//! context switches, BlockIO delay, read and write system calls, I/O) plus
//! schedstat.
//!
//! Parsing is the `procfs` crate's; this module decides what each field
//! means, which scope the kernel reports it for, and what is absent.
//!
//! Scope of each counter in a *process* image (`/proc/<pid>/…`), as the
//! kernel fills it (fs/proc/array.c, fs/proc/base.c):
//!
//! | counter | file | scope |
//! |---|---|---|
//! | `utime_ticks`, `stime_ticks` | stat | whole process, including reaped threads |
//! | `blkio_ticks` | stat (delayacct_blkio_ticks) | main thread only |
//! | `voluntary_switches`, `involuntary_switches` | status | main thread only |
//! | `rchar_bytes` … `cancelled_write_bytes`, `read_syscalls`, `write_syscalls` | io | whole process, including reaped threads |
//! | `minflt`, `majflt`, `guest_ticks` | stat | whole process, including reaped threads |
//! | `cguest_ticks` | stat | the process's reaped children |
//! | `schedstat_*` | schedstat | main thread only |
//!
//! In a *thread* image (`/proc/<pid>/task/<tid>/…`) every counter is that
//! thread's own. Sum thread images with [`Counters::sum`] for the live
//! threads' totals of the main-thread-only counters; threads that already
//! exited are then missing (their final values come from taskstats exit
//! records or the eBPF ledger).
use std::path::Path;

use procfs::ProcError;
use procfs::process::{Io, Process, Schedstat, Stat, Status};
use serde::Serialize;

use super::{ProcReadError, Regressions};

/// Whether an image describes a whole process or one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Process,
    Thread,
}

/// Cumulative counters of one process or thread. Every counter is `None`
/// when the kernel does not provide it (no CONFIG_TASK_IO_ACCOUNTING, no
/// CONFIG_SCHED_INFO, no permission to read another user's `io`, an old
/// kernel without the field), never zero.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// User-mode CPU time, in USER_HZ ticks (stat field 14).
    pub utime_ticks: Option<u64>,
    /// Kernel-mode CPU time, in USER_HZ ticks (stat field 15).
    pub stime_ticks: Option<u64>,
    /// Time blocked on synchronous block I/O, in USER_HZ ticks (stat field
    /// 42, delayacct_blkio_ticks; TTPv2's BlockIO delay). Stays 0 while
    /// `kernel.task_delayacct` is 0.
    pub blkio_ticks: Option<u64>,
    /// Time running a virtual CPU, in USER_HZ ticks (stat field 43,
    /// `guest_time`; TTPv2 Sec. 3.5 (e)). Also counted in `utime_ticks`.
    pub guest_ticks: Option<u64>,
    /// Guest time of reaped children, in USER_HZ ticks (stat field 44,
    /// `cguest_time`; Sec. 3.5 (f)).
    pub cguest_ticks: Option<u64>,
    /// Minor page faults (stat field 10, `minflt`).
    pub minflt: Option<u64>,
    /// Major page faults, those that read from storage (stat field 12,
    /// `majflt`).
    pub majflt: Option<u64>,
    /// Read-like system calls (io `syscr`; Sec. 3.5 (j)).
    pub read_syscalls: Option<u64>,
    /// Write-like system calls (io `syscw`; Sec. 3.5 (k)).
    pub write_syscalls: Option<u64>,
    /// Voluntary context switches (status `voluntary_ctxt_switches`).
    pub voluntary_switches: Option<u64>,
    /// Involuntary context switches (status `nonvoluntary_ctxt_switches`).
    pub involuntary_switches: Option<u64>,
    /// Bytes passed to read-like syscalls (io `rchar`), cache hits included.
    pub rchar_bytes: Option<u64>,
    /// Bytes passed to write-like syscalls (io `wchar`).
    pub wchar_bytes: Option<u64>,
    /// Bytes this task caused to be fetched from storage (io `read_bytes`).
    pub read_bytes: Option<u64>,
    /// Bytes this task caused to be sent to storage (io `write_bytes`).
    pub write_bytes: Option<u64>,
    /// Bytes of dirty page cache this task truncated before writeback (io
    /// `cancelled_write_bytes`).
    pub cancelled_write_bytes: Option<u64>,
    /// Time on CPU in ns, exact (schedstat field 1, `se.sum_exec_runtime`).
    pub schedstat_run_ns: Option<u64>,
    /// Time runnable but waiting on a run queue in ns (schedstat field 2,
    /// `sched_info.run_delay`).
    pub schedstat_wait_ns: Option<u64>,
    /// Timeslices run on a CPU (schedstat field 3, `sched_info.pcount`).
    pub schedstat_timeslices: Option<u64>,
}

/// Names and accessors of every counter, in one place so that sums and
/// deltas cannot forget one.
type Field = (
    &'static str,
    fn(&Counters) -> Option<u64>,
    fn(&mut Counters) -> &mut Option<u64>,
);
const FIELDS: [Field; 19] = [
    ("utime_ticks", |c| c.utime_ticks, |c| &mut c.utime_ticks),
    ("stime_ticks", |c| c.stime_ticks, |c| &mut c.stime_ticks),
    ("guest_ticks", |c| c.guest_ticks, |c| &mut c.guest_ticks),
    ("cguest_ticks", |c| c.cguest_ticks, |c| &mut c.cguest_ticks),
    ("minflt", |c| c.minflt, |c| &mut c.minflt),
    ("majflt", |c| c.majflt, |c| &mut c.majflt),
    (
        "read_syscalls",
        |c| c.read_syscalls,
        |c| &mut c.read_syscalls,
    ),
    (
        "write_syscalls",
        |c| c.write_syscalls,
        |c| &mut c.write_syscalls,
    ),
    ("blkio_ticks", |c| c.blkio_ticks, |c| &mut c.blkio_ticks),
    (
        "voluntary_switches",
        |c| c.voluntary_switches,
        |c| &mut c.voluntary_switches,
    ),
    (
        "involuntary_switches",
        |c| c.involuntary_switches,
        |c| &mut c.involuntary_switches,
    ),
    ("rchar_bytes", |c| c.rchar_bytes, |c| &mut c.rchar_bytes),
    ("wchar_bytes", |c| c.wchar_bytes, |c| &mut c.wchar_bytes),
    ("read_bytes", |c| c.read_bytes, |c| &mut c.read_bytes),
    ("write_bytes", |c| c.write_bytes, |c| &mut c.write_bytes),
    (
        "cancelled_write_bytes",
        |c| c.cancelled_write_bytes,
        |c| &mut c.cancelled_write_bytes,
    ),
    (
        "schedstat_run_ns",
        |c| c.schedstat_run_ns,
        |c| &mut c.schedstat_run_ns,
    ),
    (
        "schedstat_wait_ns",
        |c| c.schedstat_wait_ns,
        |c| &mut c.schedstat_wait_ns,
    ),
    (
        "schedstat_timeslices",
        |c| c.schedstat_timeslices,
        |c| &mut c.schedstat_timeslices,
    ),
];

impl Counters {
    /// Field-wise sum (e.g. over the threads of a process). A counter absent
    /// from any input is absent from the sum: a partial sum would look like a
    /// complete one.
    pub fn sum<'a>(items: impl IntoIterator<Item = &'a Counters>) -> Counters {
        let mut total = Counters::default();
        for (_, _, set) in FIELDS {
            *set(&mut total) = Some(0);
        }
        for item in items {
            for (_, get, set) in FIELDS {
                let slot = set(&mut total);
                *slot = match (*slot, get(item)) {
                    (Some(a), Some(b)) => a.checked_add(b),
                    _ => None,
                };
            }
        }
        total
    }

    /// `after - before` per counter; a counter that went backwards is `None`
    /// and its name is returned.
    pub fn delta(before: &Counters, after: &Counters) -> (Counters, Vec<&'static str>) {
        let mut regressions = Regressions::default();
        let mut d = Counters::default();
        for (name, get, set) in FIELDS {
            *set(&mut d) = regressions.sub(name, get(before), get(after));
        }
        (d, regressions.0)
    }
}

/// What `/proc` reports about one process or thread at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcImage {
    pub scope: Scope,
    /// The process id for a process image, the thread id for a thread image.
    pub pid: i32,
    /// Thread group id (the process id), from status `Tgid`.
    pub tgid: i32,
    /// Command name (stat field 2, without the parentheses; may itself
    /// contain spaces and parentheses, e.g. `((sd-pam))`).
    pub comm: String,
    /// Scheduler state letter (stat field 3: R, S, D, Z, T, t, X, I, …).
    pub state: char,
    pub ppid: i32,
    /// Real user id (status `Uid`, first value).
    pub uid: u32,
    /// Effective user id (status `Uid`, second value).
    pub euid: u32,
    /// Start time after boot in USER_HZ ticks (stat field 22). With `pid`
    /// it identifies a task across pid reuse.
    pub starttime_ticks: u64,
    /// Threads in the thread group (stat field 20).
    pub num_threads: Option<u64>,
    /// CPU it last ran on (stat field 39).
    pub processor: Option<u32>,
    pub counters: Counters,
}

/// The change of one task's counters between two images.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcDelta {
    pub pid: i32,
    pub counters: Counters,
    /// Counters present in both images that decreased (their delta is
    /// `None`). Non-empty means the images are not trustworthy.
    pub went_backwards: Vec<&'static str>,
}

impl ProcImage {
    /// Reads `/proc/<pid>` under `root` (normally `/proc`).
    pub fn read_process(root: &Path, pid: i32) -> Result<ProcImage, ProcReadError> {
        let process = open_process(root, pid)?;
        let files = TaskFiles {
            pid,
            stat: &|| process.stat(),
            status: &|| process.status(),
            io: &|| process.io(),
            schedstat: &|| process.schedstat(),
        };
        files.read(Scope::Process)
    }

    /// Reads every thread of process `pid`. Threads that exit while the
    /// list is read are left out.
    pub fn read_threads(root: &Path, pid: i32) -> Result<Vec<ProcImage>, ProcReadError> {
        let process = open_process(root, pid)?;
        let tasks = process.tasks().map_err(|e| classify(e, pid))?;
        let mut images = Vec::new();
        for task in tasks {
            let Ok(task) = task else { continue };
            match read_task(&task) {
                Ok(image) => images.push(image),
                Err(ProcReadError::Gone { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        images.sort_by_key(|i| i.pid);
        Ok(images)
    }

    /// `after - before` for the same task. Refuses images of different tasks
    /// (different pid, or the same pid with another start time: a reused
    /// pid), and reports counters that went backwards instead of wrapping.
    pub fn delta(&self, after: &ProcImage) -> Result<ProcDelta, ProcReadError> {
        if self.pid != after.pid || self.starttime_ticks != after.starttime_ticks {
            return Err(ProcReadError::DifferentTask {
                before_pid: self.pid,
                before_start_ticks: self.starttime_ticks,
                after_pid: after.pid,
                after_start_ticks: after.starttime_ticks,
            });
        }
        let (counters, went_backwards) = Counters::delta(&self.counters, &after.counters);
        Ok(ProcDelta {
            pid: self.pid,
            counters,
            went_backwards,
        })
    }
}

/// Every process id under `root`, ascending. Processes that exit while the
/// directory is listed are left out.
pub fn list_pids(root: &Path) -> Result<Vec<i32>, ProcReadError> {
    let iter =
        procfs::process::all_processes_with_root(root).map_err(|source| ProcReadError::Read {
            path: root.to_path_buf(),
            source,
        })?;
    let mut pids: Vec<i32> = iter.filter_map(|p| p.ok().map(|p| p.pid())).collect();
    pids.sort_unstable();
    Ok(pids)
}

fn open_process(root: &Path, pid: i32) -> Result<Process, ProcReadError> {
    Process::new_with_root(root.join(pid.to_string())).map_err(|e| classify(e, pid))
}

fn read_task(task: &procfs::process::Task) -> Result<ProcImage, ProcReadError> {
    let files = TaskFiles {
        pid: task.tid,
        stat: &|| task.stat(),
        status: &|| task.status(),
        io: &|| task.io(),
        schedstat: &|| task.schedstat(),
    };
    files.read(Scope::Thread)
}

/// The four files of one task directory, read the same way for processes
/// and threads.
struct TaskFiles<'a> {
    pid: i32,
    stat: &'a dyn Fn() -> procfs::ProcResult<Stat>,
    status: &'a dyn Fn() -> procfs::ProcResult<Status>,
    io: &'a dyn Fn() -> procfs::ProcResult<Io>,
    schedstat: &'a dyn Fn() -> procfs::ProcResult<Schedstat>,
}

impl TaskFiles<'_> {
    fn read(&self, scope: Scope) -> Result<ProcImage, ProcReadError> {
        // stat first: every kernel has it, so failing to find it means the
        // task is gone.
        let stat = (self.stat)().map_err(|e| classify(e, self.pid))?;
        let status = (self.status)().map_err(|e| classify(e, self.pid))?;
        let io = self.optional((self.io)())?;
        let schedstat = self.optional((self.schedstat)())?;
        Ok(ProcImage {
            scope,
            pid: stat.pid,
            tgid: status.tgid,
            comm: stat.comm.clone(),
            state: stat.state,
            ppid: stat.ppid,
            uid: status.ruid,
            euid: status.euid,
            starttime_ticks: stat.starttime,
            num_threads: u64::try_from(stat.num_threads).ok(),
            processor: stat.processor.and_then(|p| u32::try_from(p).ok()),
            counters: Counters {
                utime_ticks: Some(stat.utime),
                stime_ticks: Some(stat.stime),
                guest_ticks: stat.guest_time,
                // The kernel prints cguest_time as a signed clock_t; it is
                // a sum of non-negative times.
                cguest_ticks: stat.cguest_time.and_then(|t| u64::try_from(t).ok()),
                minflt: Some(stat.minflt),
                majflt: Some(stat.majflt),
                read_syscalls: io.as_ref().map(|io| io.syscr),
                write_syscalls: io.as_ref().map(|io| io.syscw),
                blkio_ticks: stat.delayacct_blkio_ticks,
                voluntary_switches: status.voluntary_ctxt_switches,
                involuntary_switches: status.nonvoluntary_ctxt_switches,
                rchar_bytes: io.as_ref().map(|io| io.rchar),
                wchar_bytes: io.as_ref().map(|io| io.wchar),
                read_bytes: io.as_ref().map(|io| io.read_bytes),
                write_bytes: io.as_ref().map(|io| io.write_bytes),
                cancelled_write_bytes: io.as_ref().map(|io| io.cancelled_write_bytes),
                schedstat_run_ns: schedstat.as_ref().map(|s| s.sum_exec_runtime),
                schedstat_wait_ns: schedstat.as_ref().map(|s| s.run_delay),
                schedstat_timeslices: schedstat.as_ref().map(|s| s.pcount),
            },
        })
    }

    /// A file some kernels or permissions do not provide: missing or
    /// unreadable is `None`, unless the task itself is gone.
    fn optional<T>(&self, result: procfs::ProcResult<T>) -> Result<Option<T>, ProcReadError> {
        match result {
            Ok(v) => Ok(Some(v)),
            Err(ProcError::PermissionDenied(path)) => {
                log::debug!("not permitted to read {path:?}; counters from it are absent");
                Ok(None)
            }
            // The file is missing: either the kernel lacks it, or the task
            // exited since stat was read. Re-reading stat tells which.
            Err(ProcError::NotFound(_)) => match (self.stat)() {
                Ok(_) => Ok(None),
                Err(_) => Err(ProcReadError::Gone { pid: self.pid }),
            },
            Err(e) => Err(classify(e, self.pid)),
        }
    }
}

/// Maps a procfs error on a required file: not found means the task is gone
/// (the kernel answers ENOENT or ESRCH for exited tasks).
fn classify(e: ProcError, pid: i32) -> ProcReadError {
    match e {
        ProcError::NotFound(_) => ProcReadError::Gone { pid },
        ProcError::Io(ref io, _) if io.raw_os_error() == Some(libc::ESRCH) => {
            ProcReadError::Gone { pid }
        }
        ProcError::PermissionDenied(ref path) | ProcError::Incomplete(ref path) => {
            ProcReadError::Read {
                path: path.clone().unwrap_or_default(),
                source: e,
            }
        }
        ProcError::Io(_, ref path) => ProcReadError::Read {
            path: path.clone().unwrap_or_default(),
            source: e,
        },
        other => ProcReadError::Read {
            path: Default::default(),
            source: other,
        },
    }
}

#[cfg(test)]
#[path = "proc_pid_tests.rs"]
mod tests;
