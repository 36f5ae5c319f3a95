//! Reading kernel structs. aya cannot emit CO-RE relocations from Rust, so
//! userspace resolves field offsets from /sys/kernel/btf/vmlinux and sets
//! these globals at load time (`EbpfLoader::set_global`).
use aya_ebpf::helpers::bpf_probe_read_kernel;
use ttp_common::TASK_COMM_LEN;

macro_rules! offsets {
    ($($name:ident),* $(,)?) => {
        $(
            #[unsafe(no_mangle)]
            static $name: u32 = 0;
        )*
    };
}

offsets!(
    OFF_TASK_PID,
    OFF_TASK_TGID,
    OFF_TASK_START_TIME,
    OFF_TASK_COMM,
    OFF_TASK_IN_IOWAIT_BYTE,
    TASK_IN_IOWAIT_MASK,
    OFF_TASK_SUM_EXEC,
    // task->sched_info.run_delay; 0 without CONFIG_SCHED_INFO, when
    // HAVE_RUN_DELAY is 0 too.
    OFF_TASK_RUN_DELAY,
    HAVE_RUN_DELAY,
    // task->sched_info.last_queued (with HAVE_RUN_DELAY), and the switching
    // CPU's rq->clock through task->se.cfs_rq->rq (HAVE_RQ_CLOCK: 0 without
    // CONFIG_FAIR_GROUP_SCHED's cfs_rq.rq).
    OFF_TASK_LAST_QUEUED,
    OFF_LEDGER_SE_CFS_RQ,
    OFF_LEDGER_CFS_RQ_RQ,
    OFF_RQ_CLOCK,
    HAVE_RQ_CLOCK,
    // task->delays->blkio_delay (HAVE_BLKIO: 0 without
    // CONFIG_TASK_DELAY_ACCT).
    OFF_TASK_DELAYS,
    OFF_DELAYS_BLKIO,
    OFF_DELAYS_BLKIO_START,
    HAVE_BLKIO,
    // 1 when sched_wakeup is loaded (wake latency measured).
    WAKE_HOOK,
    OFF_RQ_CMD_FLAGS,
    OFF_BIO_OPF,
    OFF_BIO_SIZE,
    // Read only by the --trace programs (trace.rs); 0 when tracing is off.
    OFF_RQ_DATA_LEN,
    OFF_RQ_SECTOR,
    OFF_RQ_Q,
    OFF_Q_DISK,
    OFF_DISK_MAJOR,
    OFF_DISK_FIRST_MINOR,
    OFF_TASK_SE_CFS_RQ,
    OFF_CFS_RQ_RQ,
    OFF_RQ_NR_RUNNING,
    OFF_TASK_SIGNAL,
    OFF_SIGNAL_LIVE,
);

#[inline(always)]
fn global(v: &'static u32) -> usize {
    // SAFETY: a plain read of a global the loader wrote before load; volatile
    // so the compiler does not fold the 0 it was declared with.
    unsafe { core::ptr::read_volatile(v) as usize }
}

/// Whether `task->sched_info.run_delay` can be read (CONFIG_SCHED_INFO).
#[inline(always)]
pub fn have_run_delay() -> bool {
    global(&HAVE_RUN_DELAY) != 0
}

/// Whether the `sched_wakeup` program is loaded (`--wake-latency`, trace).
#[inline(always)]
pub fn wake_hook() -> bool {
    global(&WAKE_HOOK) != 0
}

#[inline(always)]
unsafe fn read<T>(base: *const u8, off: usize) -> Result<T, i32> {
    unsafe { bpf_probe_read_kernel(base.add(off) as *const T) }
}

/// A task read through `bpf_probe_read_kernel` (any pointer, e.g. from
/// `bpf_get_current_task()`).
pub struct Task(pub *const u8);

/// A task pointer whose BTF type the verifier knows (a tp_btf argument):
/// its fields are plain loads at offsets the verifier reads as constants
/// from the frozen `.rodata` (aya freezes it; the loader sets the offsets
/// before load), checked against task_struct's BTF, with no helper call. A
/// fault in such a load reads 0, as bpf_probe_read_kernel would fail.
#[derive(Clone, Copy)]
pub struct BtfTask(pub *const u8);

/// A plain load at `base + off`.
#[inline(always)]
unsafe fn load<T: Copy>(base: *const u8, off: usize) -> Result<T, i32> {
    if base.is_null() {
        return Err(-1);
    }
    unsafe { Ok(core::ptr::read_volatile(base.add(off) as *const T)) }
}

impl BtfTask {
    /// The same task, for code that reads through the helper.
    #[inline(always)]
    pub fn task(&self) -> Task {
        Task(self.0)
    }
    #[inline(always)]
    pub fn pid(&self) -> Result<u32, i32> {
        unsafe { load::<u32>(self.0, global(&OFF_TASK_PID)) }
    }
    #[inline(always)]
    pub fn tgid(&self) -> Result<u32, i32> {
        unsafe { load::<u32>(self.0, global(&OFF_TASK_TGID)) }
    }
    /// A field of the task at an offset the caller's own global holds (a
    /// plain load, see the type's documentation).
    #[inline(always)]
    pub fn field<T: Copy>(&self, off: &'static u32) -> Result<T, i32> {
        unsafe { load::<T>(self.0, global(off)) }
    }
    /// The task a pointer field at `off` points to (`real_parent`, …).
    #[inline(always)]
    pub fn task_at(&self, off: &'static u32) -> Result<BtfTask, i32> {
        let p = unsafe { load::<*const u8>(self.0, global(off))? };
        if p.is_null() { Err(-1) } else { Ok(BtfTask(p)) }
    }
    /// `task_struct.in_iowait`, a one-bit bitfield: set by io_schedule*()
    /// while the task waits for block I/O.
    #[inline(always)]
    pub fn in_iowait(&self) -> Result<bool, i32> {
        let byte = unsafe { load::<u8>(self.0, global(&OFF_TASK_IN_IOWAIT_BYTE))? };
        Ok(byte as usize & global(&TASK_IN_IOWAIT_MASK) != 0)
    }
    /// See [`Task::sum_exec_runtime`].
    #[inline(always)]
    pub fn sum_exec_runtime(&self) -> Result<u64, i32> {
        unsafe { load::<u64>(self.0, global(&OFF_TASK_SUM_EXEC)) }
    }
    /// See [`Task::run_delay`].
    #[inline(always)]
    pub fn run_delay(&self) -> Option<u64> {
        if !have_run_delay() {
            return None;
        }
        unsafe { load::<u64>(self.0, global(&OFF_TASK_RUN_DELAY)).ok() }
    }
    /// `task->sched_info.last_queued`: the rq clock when the task was last
    /// enqueued, while it waits on a run queue (0 once
    /// `sched_info_arrive` ended the wait, which runs after the
    /// sched_switch tracepoint). None without CONFIG_SCHED_INFO.
    #[inline(always)]
    pub fn last_queued(&self) -> Option<u64> {
        if !have_run_delay() {
            return None;
        }
        unsafe { load::<u64>(self.0, global(&OFF_TASK_LAST_QUEUED)).ok() }
    }
    /// `rq->clock` of the run queue the task is on
    /// (`task->se.cfs_rq->rq`): for the task being switched in, the
    /// switching CPU's, which `__schedule` updated before the tracepoint
    /// (unless a wake-up that preempted skipped it: RQCF_ACT_SKIP).
    #[inline(always)]
    pub fn rq_clock(&self) -> Option<u64> {
        if global(&HAVE_RQ_CLOCK) == 0 {
            return None;
        }
        unsafe {
            let cfs_rq = load::<*const u8>(self.0, global(&OFF_LEDGER_SE_CFS_RQ)).ok()?;
            let rq = load::<*const u8>(cfs_rq, global(&OFF_LEDGER_CFS_RQ_RQ)).ok()?;
            load::<u64>(rq, global(&OFF_RQ_CLOCK)).ok()
        }
    }
    /// `task->delays->blkio_delay`: delay accounting's cumulative block-I/O
    /// wait (ns), grown by `delayacct_blkio_end` at the wake-up that ends
    /// an iowait (only while kernel.task_delayacct is on). None when the
    /// kernel has no delay accounting or the task no `delays`.
    #[inline(always)]
    pub fn blkio_delay(&self) -> Option<u64> {
        if global(&HAVE_BLKIO) == 0 {
            return None;
        }
        unsafe {
            let delays = load::<*const u8>(self.0, global(&OFF_TASK_DELAYS)).ok()?;
            load::<u64>(delays, global(&OFF_DELAYS_BLKIO)).ok()
        }
    }
    /// (`delays->blkio_start`, `delays->blkio_delay`): when the task's
    /// last recorded block-I/O wait began (local_clock, the rq clock's
    /// source) and the cumulative delay.
    #[inline(always)]
    pub fn blkio(&self) -> Option<(u64, u64)> {
        if global(&HAVE_BLKIO) == 0 {
            return None;
        }
        unsafe {
            let delays = load::<*const u8>(self.0, global(&OFF_TASK_DELAYS)).ok()?;
            Some((
                load::<u64>(delays, global(&OFF_DELAYS_BLKIO_START)).ok()?,
                load::<u64>(delays, global(&OFF_DELAYS_BLKIO)).ok()?,
            ))
        }
    }
}

impl Task {
    #[inline(always)]
    pub fn pid(&self) -> Result<u32, i32> {
        unsafe { read::<u32>(self.0, global(&OFF_TASK_PID)) }
    }
    #[inline(always)]
    pub fn tgid(&self) -> Result<u32, i32> {
        unsafe { read::<u32>(self.0, global(&OFF_TASK_TGID)) }
    }
    #[inline(always)]
    pub fn start_time(&self) -> Result<u64, i32> {
        unsafe { read::<u64>(self.0, global(&OFF_TASK_START_TIME)) }
    }
    #[inline(always)]
    pub fn comm(&self) -> Result<[u8; TASK_COMM_LEN], i32> {
        unsafe { read::<[u8; TASK_COMM_LEN]>(self.0, global(&OFF_TASK_COMM)) }
    }
    /// `task->se.sum_exec_runtime`: the scheduler's count of the task's
    /// CPU time (what /proc/PID/schedstat reports first), ns.
    #[inline(always)]
    pub fn sum_exec_runtime(&self) -> Result<u64, i32> {
        unsafe { read::<u64>(self.0, global(&OFF_TASK_SUM_EXEC)) }
    }
    /// `task->sched_info.run_delay`: the scheduler's count of the task's
    /// time runnable on a run queue (schedstat's second field), ns. None
    /// when the kernel has no CONFIG_SCHED_INFO.
    #[inline(always)]
    pub fn run_delay(&self) -> Option<u64> {
        if !have_run_delay() {
            return None;
        }
        unsafe { read::<u64>(self.0, global(&OFF_TASK_RUN_DELAY)).ok() }
    }
    /// `rq->nr_running` of the run queue the task is on
    /// (`task->se.cfs_rq->rq`; the idle task's points at its CPU's).
    #[inline(always)]
    pub fn rq_nr_running(&self) -> Result<u32, i32> {
        unsafe {
            let cfs_rq = read::<*const u8>(self.0, global(&OFF_TASK_SE_CFS_RQ))?;
            let rq = read::<*const u8>(cfs_rq, global(&OFF_CFS_RQ_RQ))?;
            read::<u32>(rq, global(&OFF_RQ_NR_RUNNING))
        }
    }
    /// `task->signal->live`: threads of the process that have not yet
    /// started exiting (0 at the last thread's final switch-out).
    #[inline(always)]
    pub fn signal_live(&self) -> Result<u32, i32> {
        unsafe {
            let signal = read::<*const u8>(self.0, global(&OFF_TASK_SIGNAL))?;
            read::<u32>(signal, global(&OFF_SIGNAL_LIVE))
        }
    }
}

pub struct Request(pub *const u8);

impl Request {
    #[inline(always)]
    pub fn op(&self) -> Result<u32, i32> {
        unsafe { Ok(read::<u32>(self.0, global(&OFF_RQ_CMD_FLAGS))? & REQ_OP_MASK) }
    }
    /// The operation by a plain load, as [`BtfTask`]'s fields: only for a
    /// pointer whose BTF type the verifier knows (the tracepoint's own
    /// argument). `bpf_probe_read_kernel` was 17 % of `block_io_start`
    /// under TPC-B (docs/ledger-cost.md).
    #[inline(always)]
    pub fn op_btf(&self) -> Result<u32, i32> {
        unsafe { Ok(load::<u32>(self.0, global(&OFF_RQ_CMD_FLAGS))? & REQ_OP_MASK) }
    }
    #[inline(always)]
    pub fn data_len(&self) -> Result<u32, i32> {
        unsafe { read::<u32>(self.0, global(&OFF_RQ_DATA_LEN)) }
    }
    #[inline(always)]
    pub fn sector(&self) -> Result<u64, i32> {
        unsafe { read::<u64>(self.0, global(&OFF_RQ_SECTOR)) }
    }
    /// (major, first minor) of the request's disk (`rq->q->disk`), as the
    /// block tracepoints' own `dev` field (disk_devt) gives it.
    #[inline(always)]
    pub fn disk(&self) -> Result<(u32, u32), i32> {
        unsafe {
            let q = read::<*const u8>(self.0, global(&OFF_RQ_Q))?;
            let disk = read::<*const u8>(q, global(&OFF_Q_DISK))?;
            if disk.is_null() {
                return Ok((0, 0));
            }
            Ok((
                read::<u32>(disk, global(&OFF_DISK_MAJOR))?,
                read::<u32>(disk, global(&OFF_DISK_FIRST_MINOR))?,
            ))
        }
    }
}

/// The `struct bio *` argument of a tp_btf program: its fields are plain
/// loads the verifier checks against the BTF (see [`BtfTask`]), not
/// helper calls.
pub struct Bio(pub *const u8);

impl Bio {
    #[inline(always)]
    pub fn size(&self) -> Result<u32, i32> {
        unsafe { load::<u32>(self.0, global(&OFF_BIO_SIZE)) }
    }
    #[inline(always)]
    pub fn op(&self) -> Result<u32, i32> {
        unsafe { Ok(load::<u32>(self.0, global(&OFF_BIO_OPF))? & REQ_OP_MASK) }
    }
}

/// include/linux/blk_types.h
pub const REQ_OP_MASK: u32 = 0xff;
pub const REQ_OP_READ: u32 = 0;
pub const REQ_OP_WRITE: u32 = 1;

/// include/linux/sched.h task states, as passed to trace_sched_switch.
pub const TASK_RUNNING: u32 = 0;
pub const TASK_INTERRUPTIBLE: u32 = 0x1;
pub const TASK_UNINTERRUPTIBLE: u32 = 0x2;
pub const TASK_DEAD: u32 = 0x80;
pub const TASK_NOLOAD: u32 = 0x400;
