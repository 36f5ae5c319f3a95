//! `struct taskstats` (include/uapi/linux/taskstats.h) decoded by offset.
//!
//! The struct is versioned and only ever grows at the end, keeping 64-bit
//! alignment; the kernel sends `sizeof(struct taskstats)` of the running
//! kernel. Offsets below are those of the UAPI header (checked against
//! `offsetof` on /usr/include/linux/taskstats.h, version 13, 416 bytes); a
//! field is read only if the payload's version and length both cover it.
//! Reading is by `from_ne_bytes` on slices, never by casting the buffer to a
//! Rust twin of the C struct.
use serde::Serialize;

use super::error::TaskstatsError;

/// Byte offsets of the fields read, from the UAPI header.
mod off {
    pub(crate) const VERSION: usize = 0; // __u16
    pub(crate) const AC_EXITCODE: usize = 4; // __u32
    pub(crate) const AC_FLAG: usize = 8; // __u8
    pub(crate) const AC_NICE: usize = 9; // __u8
    pub(crate) const CPU_COUNT: usize = 16;
    pub(crate) const CPU_DELAY_TOTAL: usize = 24;
    pub(crate) const BLKIO_COUNT: usize = 32;
    pub(crate) const BLKIO_DELAY_TOTAL: usize = 40;
    pub(crate) const SWAPIN_COUNT: usize = 48;
    pub(crate) const SWAPIN_DELAY_TOTAL: usize = 56;
    pub(crate) const CPU_RUN_REAL_TOTAL: usize = 64;
    pub(crate) const CPU_RUN_VIRTUAL_TOTAL: usize = 72;
    pub(crate) const AC_COMM: usize = 80; // char[32]
    pub(crate) const COMM_LEN: usize = 32;
    pub(crate) const AC_UID: usize = 120; // __u32
    pub(crate) const AC_GID: usize = 124;
    pub(crate) const AC_PID: usize = 128;
    pub(crate) const AC_PPID: usize = 132;
    pub(crate) const AC_BTIME: usize = 136; // __u32
    pub(crate) const AC_ETIME: usize = 144;
    pub(crate) const AC_UTIME: usize = 152;
    pub(crate) const AC_STIME: usize = 160;
    pub(crate) const AC_MINFLT: usize = 168;
    pub(crate) const AC_MAJFLT: usize = 176;
    pub(crate) const READ_CHAR: usize = 216;
    pub(crate) const WRITE_CHAR: usize = 224;
    pub(crate) const READ_SYSCALLS: usize = 232;
    pub(crate) const WRITE_SYSCALLS: usize = 240;
    pub(crate) const READ_BYTES: usize = 248;
    pub(crate) const WRITE_BYTES: usize = 256;
    pub(crate) const CANCELLED_WRITE_BYTES: usize = 264;
    pub(crate) const NVCSW: usize = 272;
    pub(crate) const NIVCSW: usize = 280;
    /// End of `nivcsw`, the last field every decoded record must have.
    pub(crate) const V5_END: usize = 288;
    pub(crate) const AC_BTIME64: usize = 344; // version 10
    pub(crate) const AC_TGID: usize = 368; // version 12, __u32
    pub(crate) const AC_TGETIME: usize = 376; // version 12
}

/// Oldest version decoded: version 5 added `nvcsw`/`nivcsw` (Linux 2.6.23);
/// everything the cross-checks need is present from there on.
pub(crate) const MIN_VERSION: u16 = 5;
/// Bytes a version-5 record occupies.
pub(crate) const MIN_LEN: usize = off::V5_END;

/// Whom a record describes: one task (thread), or a whole thread group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// `TASKSTATS_TYPE_PID`: one thread.
    Task,
    /// `TASKSTATS_TYPE_TGID`: a thread group (process).
    ThreadGroup,
}

/// Where a record came from, which decides what its zeros mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    /// An exit notification (only those carry an exit code).
    pub exit: bool,
    /// Whether `kernel.task_delayacct` was 1 when the record was read.
    pub delayacct_on: bool,
}

/// One decoded taskstats record.
///
/// What is `None` and why (kernel/taskstats.c, kernel/delayacct.c,
/// kernel/tsacct.c):
/// - the CPU part of the delay group (`cpu_count`, `cpu_delay_total_ns`,
///   `cpu_run_real_total_ns`, `cpu_run_virtual_total_ns`) is absent when all
///   of it is zero: kernels that skip delay accounting for a task leave it
///   so. Note the kernel's names: `cpu_run_real_total_ns` is utime+stime as
///   task_cputime() reports them (tick-sampled under tick accounting),
///   `cpu_run_virtual_total_ns` is `sum_exec_runtime` (schedstat's first
///   field), `cpu_delay_total_ns` is schedstat's run-queue wait;
/// - the block-I/O and swap-in delays are measured only while
///   `kernel.task_delayacct` is 1: a zero read while it is 0 means "not
///   measured" and is absent (a non-zero value, gathered while it was on, is
///   kept);
/// - thread-group records carry only what the kernel sums per thread group:
///   the delay group, and for live groups elapsed/user/system time and
///   context switches (`fill_stats_for_tgid`); a thread-group *exit* record
///   carries the delay group only (`fill_tgid_exit`). Identity, page-fault
///   and I/O fields are therefore `None` in thread-group records;
/// - `ac_exitcode` is `Some` only in exit records;
/// - `ac_tgid` and `ac_tgetime_us` need version 12.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Taskstats {
    pub scope: Scope,
    /// `TASKSTATS_VERSION` of the kernel that sent it.
    pub version: u16,
    /// Raw wait status of an exited task (exit code << 8 | signal).
    pub ac_exitcode: Option<u32>,
    /// Accounting flags (`<linux/acct.h>`: AFORK, ASU, ACORE, AXSIG).
    pub ac_flag: u8,
    pub ac_nice: i8,

    /// Times the task was given a CPU (`sched_info.pcount`).
    pub cpu_count: Option<u64>,
    /// Time runnable but waiting for a CPU (`sched_info.run_delay`), ns.
    pub cpu_delay_total_ns: Option<u64>,
    /// Synchronous block I/O waits.
    pub blkio_count: Option<u64>,
    /// Time waiting for synchronous block I/O, ns (TTPv2's BlockIO delay).
    pub blkio_delay_total_ns: Option<u64>,
    pub swapin_count: Option<u64>,
    /// Time waiting for swap-in, ns.
    pub swapin_delay_total_ns: Option<u64>,
    /// utime + stime from task_cputime(), ns.
    pub cpu_run_real_total_ns: Option<u64>,
    /// `se.sum_exec_runtime`, ns.
    pub cpu_run_virtual_total_ns: Option<u64>,

    pub ac_comm: Option<String>,
    pub ac_uid: Option<u32>,
    pub ac_gid: Option<u32>,
    pub ac_pid: Option<u32>,
    pub ac_ppid: Option<u32>,
    /// Start time, seconds since the epoch (64-bit field from version 10).
    pub ac_btime_s: Option<u64>,
    /// Elapsed time since start, µs.
    pub ac_etime_us: Option<u64>,
    /// User CPU time, µs, as task_cputime() reports it: under tick-based
    /// accounting a count of sampled kernel ticks, not rescaled to the
    /// exact runtime the way /proc's utime is (cputime_adjust).
    pub ac_utime_us: Option<u64>,
    /// System CPU time, µs (like `ac_utime_us`).
    pub ac_stime_us: Option<u64>,
    pub ac_minflt: Option<u64>,
    pub ac_majflt: Option<u64>,

    /// Bytes passed to read-like syscalls (/proc io `rchar`).
    pub read_char_bytes: Option<u64>,
    /// Bytes passed to write-like syscalls (/proc io `wchar`).
    pub write_char_bytes: Option<u64>,
    pub read_syscalls: Option<u64>,
    pub write_syscalls: Option<u64>,
    /// Bytes fetched from storage (/proc io `read_bytes`).
    pub read_bytes: Option<u64>,
    /// Bytes sent to storage (/proc io `write_bytes`).
    pub write_bytes: Option<u64>,
    pub cancelled_write_bytes: Option<u64>,
    /// Voluntary context switches.
    pub nvcsw: Option<u64>,
    /// Involuntary context switches.
    pub nivcsw: Option<u64>,

    /// Thread group id (version 12).
    pub ac_tgid: Option<u32>,
    /// Thread group's elapsed time, µs (version 12).
    pub ac_tgetime_us: Option<u64>,
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(a)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_ne_bytes(a)
}

impl Taskstats {
    /// Decodes the payload of a `TASKSTATS_TYPE_STATS` attribute. Payloads
    /// shorter than a version-5 record, or of a version below 5, are refused.
    pub fn decode(b: &[u8], scope: Scope, origin: Origin) -> Result<Taskstats, TaskstatsError> {
        if b.len() < 2 {
            return Err(TaskstatsError::TooShort {
                len: b.len(),
                version: None,
                need: MIN_LEN,
            });
        }
        let version = u16::from_ne_bytes([b[off::VERSION], b[off::VERSION + 1]]);
        if version < MIN_VERSION || b.len() < MIN_LEN {
            return Err(TaskstatsError::TooShort {
                len: b.len(),
                version: Some(version),
                need: MIN_LEN,
            });
        }
        let has = |v: u16, end: usize| version >= v && b.len() >= end;
        let u = |at| u64_at(b, at);

        let cpu_part = [
            off::CPU_COUNT,
            off::CPU_DELAY_TOTAL,
            off::CPU_RUN_REAL_TOTAL,
            off::CPU_RUN_VIRTUAL_TOTAL,
        ];
        let cpu_filled = cpu_part.iter().any(|&at| u(at) != 0);
        let d = |at| cpu_filled.then(|| u(at));
        // A (count, total) pair of a delay measured only while
        // task_delayacct is 1.
        let measured = |count_at, total_at| {
            let pair = (u(count_at), u(total_at));
            if origin.delayacct_on || pair != (0, 0) {
                (Some(pair.0), Some(pair.1))
            } else {
                (None, None)
            }
        };
        let (blkio_count, blkio_delay) = measured(off::BLKIO_COUNT, off::BLKIO_DELAY_TOTAL);
        let (swapin_count, swapin_delay) = measured(off::SWAPIN_COUNT, off::SWAPIN_DELAY_TOTAL);

        let task = scope == Scope::Task;
        // Fields the kernel fills for single tasks only.
        let t64 = |at| task.then(|| u(at));
        let t32 = |at| task.then(|| u32_at(b, at));
        // Fields it also sums for live thread groups (elapsed time is never
        // zero once filled, so zero marks the exit record that lacks them).
        let group_filled = task || u(off::AC_ETIME) != 0;
        let g = |at| group_filled.then(|| u(at));

        let comm = task.then(|| {
            let raw = &b[off::AC_COMM..off::AC_COMM + off::COMM_LEN];
            let end = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
            String::from_utf8_lossy(&raw[..end]).into_owned()
        });
        let btime = if has(10, off::AC_BTIME64 + 8) {
            t64(off::AC_BTIME64)
        } else {
            t32(off::AC_BTIME).map(u64::from)
        };

        Ok(Taskstats {
            scope,
            version,
            ac_exitcode: (origin.exit && task).then(|| u32_at(b, off::AC_EXITCODE)),
            ac_flag: b[off::AC_FLAG],
            ac_nice: i8::from_ne_bytes([b[off::AC_NICE]]),
            cpu_count: d(off::CPU_COUNT),
            cpu_delay_total_ns: d(off::CPU_DELAY_TOTAL),
            blkio_count,
            blkio_delay_total_ns: blkio_delay,
            swapin_count,
            swapin_delay_total_ns: swapin_delay,
            cpu_run_real_total_ns: d(off::CPU_RUN_REAL_TOTAL),
            cpu_run_virtual_total_ns: d(off::CPU_RUN_VIRTUAL_TOTAL),
            ac_comm: comm,
            ac_uid: t32(off::AC_UID),
            ac_gid: t32(off::AC_GID),
            ac_pid: t32(off::AC_PID),
            ac_ppid: t32(off::AC_PPID),
            ac_btime_s: btime,
            ac_etime_us: g(off::AC_ETIME),
            ac_utime_us: g(off::AC_UTIME),
            ac_stime_us: g(off::AC_STIME),
            ac_minflt: t64(off::AC_MINFLT),
            ac_majflt: t64(off::AC_MAJFLT),
            read_char_bytes: t64(off::READ_CHAR),
            write_char_bytes: t64(off::WRITE_CHAR),
            read_syscalls: t64(off::READ_SYSCALLS),
            write_syscalls: t64(off::WRITE_SYSCALLS),
            read_bytes: t64(off::READ_BYTES),
            write_bytes: t64(off::WRITE_BYTES),
            cancelled_write_bytes: t64(off::CANCELLED_WRITE_BYTES),
            nvcsw: g(off::NVCSW),
            nivcsw: g(off::NIVCSW),
            ac_tgid: has(12, off::AC_TGID + 4)
                .then(|| t32(off::AC_TGID))
                .flatten(),
            ac_tgetime_us: has(12, off::AC_TGETIME + 8)
                .then(|| t64(off::AC_TGETIME))
                .flatten(),
        })
    }
}

/// The cumulative counters of a record, for deltas.
type Counter = (&'static str, fn(&mut Taskstats) -> &mut Option<u64>);
const COUNTERS: [Counter; 20] = [
    ("cpu_count", |t| &mut t.cpu_count),
    ("cpu_delay_total_ns", |t| &mut t.cpu_delay_total_ns),
    ("blkio_count", |t| &mut t.blkio_count),
    ("blkio_delay_total_ns", |t| &mut t.blkio_delay_total_ns),
    ("swapin_count", |t| &mut t.swapin_count),
    ("swapin_delay_total_ns", |t| &mut t.swapin_delay_total_ns),
    ("cpu_run_real_total_ns", |t| &mut t.cpu_run_real_total_ns),
    ("cpu_run_virtual_total_ns", |t| {
        &mut t.cpu_run_virtual_total_ns
    }),
    ("ac_etime_us", |t| &mut t.ac_etime_us),
    ("ac_utime_us", |t| &mut t.ac_utime_us),
    ("ac_stime_us", |t| &mut t.ac_stime_us),
    ("ac_minflt", |t| &mut t.ac_minflt),
    ("ac_majflt", |t| &mut t.ac_majflt),
    ("read_char_bytes", |t| &mut t.read_char_bytes),
    ("write_char_bytes", |t| &mut t.write_char_bytes),
    ("read_syscalls", |t| &mut t.read_syscalls),
    ("write_syscalls", |t| &mut t.write_syscalls),
    ("read_bytes", |t| &mut t.read_bytes),
    ("write_bytes", |t| &mut t.write_bytes),
    ("cancelled_write_bytes", |t| &mut t.cancelled_write_bytes),
];
const SWITCHES: [Counter; 2] = [("nvcsw", |t| &mut t.nvcsw), ("nivcsw", |t| &mut t.nivcsw)];

impl Taskstats {
    /// `after - self` for two records of the same task or thread group
    /// (EMP Sec. 3.1: the before and after images around one execution).
    /// Identity fields are `after`'s; every cumulative counter is the
    /// difference, `None` when absent from either side or when it went
    /// backwards (those are named in the second value). Records of different
    /// scopes, pids or start times are refused.
    pub fn delta(
        &self,
        after: &Taskstats,
    ) -> Result<(Taskstats, Vec<&'static str>), TaskstatsError> {
        let who = |t: &Taskstats| {
            format!(
                "{:?} pid {:?} started {:?}",
                t.scope, t.ac_pid, t.ac_btime_s
            )
        };
        if self.scope != after.scope
            || self.ac_pid != after.ac_pid
            || self.ac_btime_s != after.ac_btime_s
        {
            return Err(TaskstatsError::DifferentTask {
                before: who(self),
                after: who(after),
            });
        }
        let mut before = self.clone();
        let mut d = after.clone();
        let mut regressions = crate::collect::Regressions::default();
        for (name, field) in COUNTERS.iter().chain(&SWITCHES) {
            let b = *field(&mut before);
            let slot = field(&mut d);
            *slot = regressions.sub(name, b, *slot);
        }
        Ok((d, regressions.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUERY: Origin = Origin {
        exit: false,
        delayacct_on: true,
    };
    const EXIT: Origin = Origin {
        exit: true,
        delayacct_on: true,
    };

    /// A record laid out as the UAPI header says, built field by field.
    fn record(version: u16, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        let mut put = |at: usize, bytes: &[u8]| {
            if at + bytes.len() <= b.len() {
                b[at..at + bytes.len()].copy_from_slice(bytes);
            }
        };
        put(off::VERSION, &version.to_ne_bytes());
        put(off::AC_EXITCODE, &(3u32 << 8).to_ne_bytes());
        put(off::AC_NICE, &[(-5i8) as u8]);
        put(off::CPU_COUNT, &7u64.to_ne_bytes());
        put(off::CPU_DELAY_TOTAL, &11_000u64.to_ne_bytes());
        put(off::BLKIO_DELAY_TOTAL, &13_000u64.to_ne_bytes());
        put(off::CPU_RUN_REAL_TOTAL, &200_000_000u64.to_ne_bytes());
        put(off::CPU_RUN_VIRTUAL_TOTAL, &201_234_567u64.to_ne_bytes());
        put(off::AC_COMM, b"((sd-pam) x)\0");
        put(off::AC_UID, &1000u32.to_ne_bytes());
        put(off::AC_PID, &4242u32.to_ne_bytes());
        put(off::AC_PPID, &1u32.to_ne_bytes());
        put(off::AC_BTIME, &1_700_000_000u32.to_ne_bytes());
        put(off::AC_ETIME, &250_000u64.to_ne_bytes());
        put(off::AC_UTIME, &150_000u64.to_ne_bytes());
        put(off::AC_STIME, &50_000u64.to_ne_bytes());
        put(off::READ_CHAR, &6976u64.to_ne_bytes());
        put(off::READ_BYTES, &4096u64.to_ne_bytes());
        put(off::NVCSW, &2u64.to_ne_bytes());
        put(off::NIVCSW, &22u64.to_ne_bytes());
        put(off::AC_BTIME64, &1_800_000_000u64.to_ne_bytes());
        put(off::AC_TGID, &4240u32.to_ne_bytes());
        b
    }

    #[test]
    fn decodes_each_field_at_its_offset() {
        // Catches a shifted offset (every value is distinct).
        let t = Taskstats::decode(&record(13, 416), Scope::Task, EXIT).unwrap();
        assert_eq!(t.version, 13);
        assert_eq!(t.ac_exitcode, Some(768));
        assert_eq!(t.ac_nice, -5);
        assert_eq!(t.cpu_count, Some(7));
        assert_eq!(t.cpu_delay_total_ns, Some(11_000));
        assert_eq!(t.blkio_delay_total_ns, Some(13_000));
        assert_eq!(t.blkio_count, Some(0));
        assert_eq!(t.cpu_run_real_total_ns, Some(200_000_000));
        assert_eq!(t.cpu_run_virtual_total_ns, Some(201_234_567));
        assert_eq!(t.ac_comm.as_deref(), Some("((sd-pam) x)"));
        assert_eq!(
            (t.ac_uid, t.ac_pid, t.ac_ppid),
            (Some(1000), Some(4242), Some(1))
        );
        assert_eq!(
            (t.ac_etime_us, t.ac_utime_us, t.ac_stime_us),
            (Some(250_000), Some(150_000), Some(50_000))
        );
        assert_eq!((t.read_char_bytes, t.read_bytes), (Some(6976), Some(4096)));
        assert_eq!((t.nvcsw, t.nivcsw), (Some(2), Some(22)));
        // Version 10+ carries the 64-bit start time; 12+ the tgid.
        assert_eq!(t.ac_btime_s, Some(1_800_000_000));
        assert_eq!(t.ac_tgid, Some(4240));
    }

    #[test]
    fn older_versions_use_what_they_have() {
        // A version-8 record (344 bytes): catches reading v10/v12 fields
        // from beyond the payload or from a version that lacks them.
        let t = Taskstats::decode(&record(8, 344), Scope::Task, QUERY).unwrap();
        assert_eq!(t.ac_btime_s, Some(1_700_000_000));
        assert_eq!(t.ac_tgid, None);
        assert_eq!(t.ac_exitcode, None);
        // A newer, longer record still decodes (fields only grow at the end).
        let t = Taskstats::decode(&record(16, 512), Scope::Task, QUERY).unwrap();
        assert_eq!(t.nivcsw, Some(22));
    }

    #[test]
    fn refuses_short_payloads() {
        // Catches slicing past the end (a panic) on a truncated attribute.
        for len in [0, 1, 100, MIN_LEN - 1] {
            let b = record(13, len.max(2));
            let err = Taskstats::decode(&b[..len], Scope::Task, QUERY).unwrap_err();
            assert!(
                matches!(err, TaskstatsError::TooShort { .. }),
                "{len}: {err:?}"
            );
        }
        // Version 4 predates the context-switch counters.
        let err = Taskstats::decode(&record(4, 416), Scope::Task, QUERY).unwrap_err();
        assert!(matches!(
            err,
            TaskstatsError::TooShort {
                version: Some(4),
                ..
            }
        ));
    }

    #[test]
    fn unmeasured_delays_are_absent() {
        // task_delayacct off and no I/O delay recorded: catches reporting a
        // blkio delay of 0 ns as if it had been measured.
        let mut b = record(13, 416);
        b[off::BLKIO_DELAY_TOTAL..off::BLKIO_DELAY_TOTAL + 8].fill(0);
        let off_now = Origin {
            exit: false,
            delayacct_on: false,
        };
        let t = Taskstats::decode(&b, Scope::Task, off_now).unwrap();
        assert_eq!((t.blkio_count, t.blkio_delay_total_ns), (None, None));
        assert_eq!((t.swapin_count, t.swapin_delay_total_ns), (None, None));
        // The CPU part does not depend on the sysctl on current kernels.
        assert_eq!(t.cpu_run_virtual_total_ns, Some(201_234_567));
        // With accounting on, a zero is a measured zero.
        let t = Taskstats::decode(&b, Scope::Task, QUERY).unwrap();
        assert_eq!(t.blkio_delay_total_ns, Some(0));
        // A delay gathered while it was on is kept after it is turned off.
        let t = Taskstats::decode(&record(13, 416), Scope::Task, off_now).unwrap();
        assert_eq!(t.blkio_delay_total_ns, Some(13_000));
        // Kernels that skip delay accounting leave the CPU part zero too.
        for at in (off::CPU_COUNT..off::AC_COMM).step_by(8) {
            b[at..at + 8].fill(0);
        }
        let t = Taskstats::decode(&b, Scope::Task, off_now).unwrap();
        assert_eq!(t.cpu_run_virtual_total_ns, None);
        assert_eq!(t.cpu_count, None);
        assert_eq!(t.ac_utime_us, Some(150_000));
    }

    #[test]
    fn thread_group_records() {
        // Live thread-group query: times and switches summed, per-task fields
        // not. Catches reporting the zero I/O of a tgid record as real.
        let t = Taskstats::decode(&record(13, 416), Scope::ThreadGroup, QUERY).unwrap();
        assert_eq!(t.ac_utime_us, Some(150_000));
        assert_eq!(t.nivcsw, Some(22));
        assert_eq!(t.read_bytes, None);
        assert_eq!(t.ac_pid, None);
        assert_eq!(t.ac_comm, None);
        // Thread-group exit record: delay group only (elapsed time zero).
        let mut b = record(13, 416);
        for at in (off::AC_ETIME..off::V5_END).step_by(8) {
            b[at..at + 8].fill(0);
        }
        let t = Taskstats::decode(&b, Scope::ThreadGroup, EXIT).unwrap();
        assert_eq!(t.ac_utime_us, None);
        assert_eq!(t.nvcsw, None);
        assert_eq!(t.ac_exitcode, None);
        assert_eq!(t.blkio_delay_total_ns, Some(13_000));
    }

    #[test]
    fn delta_of_two_records() {
        let before = Taskstats::decode(&record(13, 416), Scope::Task, QUERY).unwrap();
        let mut b = record(13, 416);
        b[off::AC_UTIME..off::AC_UTIME + 8].copy_from_slice(&190_000u64.to_ne_bytes());
        b[off::NIVCSW..off::NIVCSW + 8].copy_from_slice(&20u64.to_ne_bytes());
        let after = Taskstats::decode(&b, Scope::Task, QUERY).unwrap();
        let (d, back) = before.delta(&after).unwrap();
        assert_eq!(d.ac_utime_us, Some(40_000));
        assert_eq!(d.ac_stime_us, Some(0));
        // Catches wrapping a counter that decreased (22 -> 20).
        assert_eq!(d.nivcsw, None);
        assert_eq!(back, vec!["nivcsw"]);
        // Identity is kept, not subtracted.
        assert_eq!(d.ac_pid, Some(4242));
        // Catches subtracting the record of a reused pid.
        let mut other = after.clone();
        other.ac_btime_s = Some(1_800_000_001);
        assert!(matches!(
            before.delta(&other),
            Err(TaskstatsError::DifferentTask { .. })
        ));
    }
}
