//! The per-event stream of `--trace`: compact records for the traced
//! processes only, through their own ring buffer. Every record starts with a
//! [`trace::Header`] whose `kind` says which payload follows.

use super::TASK_COMM_LEN;

/// Bytes of the trace ring buffer when tracing is on (a power of two,
/// a multiple of the page size). With tracing off the loader shrinks it
/// to one page.
pub const TRACE_RING_BYTES: u32 = 8 << 20;

/// Processes that can be traced at once (the `TRACED` map).
pub const MAX_TRACED: u32 = 4096;

/// Record kinds, with fixed ids (`Header::kind`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// [`Switch`]: the thread starts running on `Header::cpu`.
    SwitchIn = 1,
    /// [`Switch`]: the thread leaves the CPU for `Switch::state`.
    SwitchOut = 2,
    /// [`Wakeup`]: the ledger moved the thread to runnable
    /// (sched_wakeup, or sched_wakeup_new with `flags & WAKEUP_NEW`).
    Wakeup = 3,
    /// [`Wakeup`]: sched_waking, in the waker's context: who woke it.
    Waking = 4,
    /// [`Block`]: a request was created by the thread (block_io_start).
    BlockSubmit = 5,
    /// [`Block`]: the request was handed to the driver (block_rq_issue).
    BlockIssue = 6,
    /// [`Block`]: the request completed (block_io_done).
    BlockComplete = 7,
    /// [`Proc`]: the thread was created; `other_*` is its parent.
    Fork = 8,
    /// [`Proc`]: the thread called exec; `comm` is the new name.
    Exec = 9,
    /// [`Proc`]: the thread's final switch-out.
    Exit = 10,
    /// [`CpuSample`]: a CPU's run-queue length and iowait tasks.
    CpuSample = 11,
}

impl Kind {
    pub const fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => Self::SwitchIn,
            2 => Self::SwitchOut,
            3 => Self::Wakeup,
            4 => Self::Waking,
            5 => Self::BlockSubmit,
            6 => Self::BlockIssue,
            7 => Self::BlockComplete,
            8 => Self::Fork,
            9 => Self::Exec,
            10 => Self::Exit,
            11 => Self::CpuSample,
            _ => return None,
        })
    }
}

/// First in every record.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// A [`Kind`] id.
    pub kind: u32,
    /// The traced thread the record is about (for block records, the
    /// thread that created the request; 0 for CPU samples).
    pub tid: u32,
    pub tgid: u32,
    /// CPU the program ran on (for switches, the CPU switched).
    pub cpu: u32,
    /// CLOCK_MONOTONIC ns, the same instant the ledger used.
    pub ts_ns: u64,
}

/// `Switch::flags`: the switch-out was a preemption.
pub const SWITCH_PREEMPT: u32 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Switch {
    pub hdr: Header,
    /// The ledger's new state for the thread (a [`super::state`] id).
    pub state: u32,
    /// The thread on the other side of the switch (0: the idle task).
    pub other_tid: u32,
    /// `prev_state` as passed to sched_switch (switch-out only).
    pub prev_state: u32,
    pub flags: u32,
}

/// `Wakeup::flags`: first wakeup of a new task (sched_wakeup_new).
pub const WAKEUP_NEW: u32 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wakeup {
    pub hdr: Header,
    /// The task current on the waking CPU at sched_waking (0 for the
    /// idle task; an interrupted task when the wakeup comes from an
    /// interrupt). 0 in `Kind::Wakeup` records.
    pub waker_tid: u32,
    pub waker_tgid: u32,
    pub flags: u32,
    pub _pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Block {
    pub hdr: Header,
    /// The request's address: pairs submit, issue and completion
    /// (reused after completion).
    pub rq: u64,
    /// First sector (512 bytes) of the request.
    pub sector: u64,
    /// Bytes of the request (`__data_len`; complete once merges are
    /// done, i.e. at issue; 0 at completion).
    pub bytes: u32,
    /// REQ_OP_* (include/linux/blk_types.h).
    pub op: u32,
    /// Device (gendisk major:first_minor); 0:0 when unresolved.
    pub dev_major: u32,
    pub dev_minor: u32,
}

/// `Proc::flags` of an exit: the thread was the last of its process
/// (`signal->live` reached 0).
pub const EXIT_GROUP_DEAD: u32 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Proc {
    pub hdr: Header,
    /// Fork: the parent thread and its process; exec: the old tid.
    pub other_tid: u32,
    pub other_tgid: u32,
    pub flags: u32,
    pub _pad: u32,
    pub comm: [u8; TASK_COMM_LEN],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuSample {
    pub hdr: Header,
    /// rq->nr_running: tasks on this CPU's run queue, the running one
    /// included (every scheduling class).
    pub nr_running: u32,
    /// The ledger's count of tasks in iowait that slept on this CPU
    /// (the kernel's rq->nr_iowait for tasks it saw go to sleep).
    pub nr_iowait: u32,
    /// 1 while the idle task runs on this CPU.
    pub idle: u32,
    pub _pad: u32,
}

const _: () = assert!(core::mem::size_of::<Header>() == 24);
const _: () = assert!(core::mem::size_of::<Switch>() == 40);
const _: () = assert!(core::mem::size_of::<Wakeup>() == 40);
const _: () = assert!(core::mem::size_of::<Block>() == 56);
const _: () = assert!(core::mem::size_of::<Proc>() == 56);
const _: () = assert!(core::mem::size_of::<CpuSample>() == 40);
// The header is the prefix every reader decodes first.
const _: () = assert!(core::mem::offset_of!(Switch, hdr) == 0);
const _: () = assert!(core::mem::offset_of!(Block, hdr) == 0);
const _: () = assert!(core::mem::offset_of!(Proc, hdr) == 0);
