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
    OFF_RQ_CMD_FLAGS,
    OFF_BIO_OPF,
    OFF_BIO_SIZE,
);

#[inline(always)]
fn global(v: &'static u32) -> usize {
    // SAFETY: a plain read of a global the loader wrote before load; volatile
    // so the compiler does not fold the 0 it was declared with.
    unsafe { core::ptr::read_volatile(v) as usize }
}

#[inline(always)]
unsafe fn read<T>(base: *const u8, off: usize) -> Result<T, i32> {
    unsafe { bpf_probe_read_kernel(base.add(off) as *const T) }
}

pub struct Task(pub *const u8);

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
    /// `task_struct.in_iowait`, a one-bit bitfield: set by io_schedule*()
    /// while the task waits for block I/O.
    #[inline(always)]
    pub fn in_iowait(&self) -> Result<bool, i32> {
        let byte = unsafe { read::<u8>(self.0, global(&OFF_TASK_IN_IOWAIT_BYTE))? };
        Ok(byte as usize & global(&TASK_IN_IOWAIT_MASK) != 0)
    }
}

pub struct Request(pub *const u8);

impl Request {
    #[inline(always)]
    pub fn op(&self) -> Result<u32, i32> {
        unsafe { Ok(read::<u32>(self.0, global(&OFF_RQ_CMD_FLAGS))? & REQ_OP_MASK) }
    }
}

pub struct Bio(pub *const u8);

impl Bio {
    #[inline(always)]
    pub fn size(&self) -> Result<u32, i32> {
        unsafe { read::<u32>(self.0, global(&OFF_BIO_SIZE)) }
    }
    #[inline(always)]
    pub fn op(&self) -> Result<u32, i32> {
        unsafe { Ok(read::<u32>(self.0, global(&OFF_BIO_OPF))? & REQ_OP_MASK) }
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
