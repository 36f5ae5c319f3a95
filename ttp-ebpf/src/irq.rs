//! Interrupt time inside a thread's on-CPU runs (`--irq-time`). This
//! kernel (no CONFIG_IRQ_TIME_ACCOUNTING) charges hard and soft interrupts
//! to the task they interrupt, so the kernel's runtime of a thread, and
//! the ledger's `on_cpu_ns`, include other work's interrupts. Four programs
//! keep a per-CPU interrupt clock (`IrqClock`, ttp_common::clocks): the
//! outermost handler's entry stamps it, its exit adds the span, a handler
//! inside another is inside the outer one's span. The switch-in stores the
//! CPU's clock in the thread's account, the switch-out adds its growth to
//! `irq_ns` (sched.rs calls [`switched_in`] and [`switched_out`]).
//!
//! Covered: device interrupt handlers (`irq_handler_*`, each action of the
//! line), the local timer where the kernel has its event (x86's
//! `irq_vectors:local_timer_*`), and softirqs, wherever they run (at an
//! interrupt's exit, at a `local_bh_enable` in the task's own context, or
//! in ksoftirqd, whose own runtime they then are). Not covered: the IPIs,
//! and the interrupt entry and exit code around a handler
//! (docs/ttpv2.md).
//!
//! Nothing here runs unless the loader set `IRQ_ON` and attached the
//! programs; without it the verifier drops the calls in sched.rs.
use aya_ebpf::{
    macros::{btf_tracepoint, map},
    maps::PerCpuArray,
    programs::BtfTracePointContext,
};
use ttp_common::{IrqClock, ThreadAccount, flag, stat, state};

/// The CPU's interrupt clock; userspace reads every CPU's copy.
#[map]
static IRQ_CLOCK: PerCpuArray<IrqClock> = PerCpuArray::with_max_entries(1, 0);

/// 1 when the interrupt programs are loaded (read-only, set by the loader).
#[unsafe(no_mangle)]
static IRQ_ON: u32 = 0;

#[inline(always)]
fn irq_on() -> bool {
    // SAFETY: a plain read of a global the loader wrote before load;
    // volatile so the compiler does not fold the 0 it was declared with.
    unsafe { core::ptr::read_volatile(&IRQ_ON) != 0 }
}

/// This CPU's clock. Only this CPU writes it, from its handlers' events
/// and its switches: an event of a handler that interrupts one of these
/// programs between its read and its write can be lost or counted twice
/// (a window of a few instructions).
#[inline(always)]
fn clock() -> Option<&'static mut IrqClock> {
    // SAFETY: per-CPU map value, valid for the program's run.
    IRQ_CLOCK.get_ptr_mut(0).map(|p| unsafe { &mut *p })
}

#[inline(always)]
fn enter(soft: bool) -> i32 {
    if let Some(c) = clock() {
        c.enter(crate::now_ns(), soft);
    }
    0
}

#[inline(always)]
fn exit() -> i32 {
    if let Some(c) = clock() {
        c.exit(crate::now_ns());
    }
    0
}

/// irq_handler_entry(int irq, struct irqaction *action)
#[btf_tracepoint(function = "irq_handler_entry")]
pub fn irq_handler_entry(_ctx: BtfTracePointContext) -> i32 {
    enter(false)
}

/// irq_handler_exit(int irq, struct irqaction *action, int ret)
#[btf_tracepoint(function = "irq_handler_exit")]
pub fn irq_handler_exit(_ctx: BtfTracePointContext) -> i32 {
    exit()
}

/// local_timer_entry(int vector) (x86): the local APIC timer, whose
/// handler runs the tick and the expired hrtimers. It has no
/// `irq_handler_*` event; the softirqs it raises run after its exit, as
/// softirqs.
#[btf_tracepoint(function = "local_timer_entry")]
pub fn local_timer_entry(_ctx: BtfTracePointContext) -> i32 {
    enter(false)
}

/// local_timer_exit(int vector) (x86)
#[btf_tracepoint(function = "local_timer_exit")]
pub fn local_timer_exit(_ctx: BtfTracePointContext) -> i32 {
    exit()
}

/// softirq_entry(unsigned int vec_nr)
#[btf_tracepoint(function = "softirq_entry")]
pub fn softirq_entry(_ctx: BtfTracePointContext) -> i32 {
    enter(true)
}

/// softirq_exit(unsigned int vec_nr)
#[btf_tracepoint(function = "softirq_exit")]
pub fn softirq_exit(_ctx: BtfTracePointContext) -> i32 {
    exit()
}

/// At a thread's switch-out on `cpu_id`: the interrupt time of the run
/// that ends goes to its `irq_ns`, when the ledger saw the run begin here
/// (a run whose switch-in was missed has no base: its interrupts are not
/// counted, never another run's). `ran` is the runtime the run gained
/// (sched.rs `take_counters_at_switch_out`), which holds the run's
/// interrupts on this kernel: the growth is cut to it, else to the run's
/// wall clock. Called before the switch-out changes the account's state.
#[inline(always)]
pub fn switched_out(a: &mut ThreadAccount, cpu_id: u32, now: u64, ran: Option<u64>) {
    if !irq_on() {
        return;
    }
    if a.state == state::RUNNING
        && a.run_cpu == cpu_id
        && a.flags & flag::IRQ_SNAP != 0
        && let Some(c) = clock()
    {
        // The open interval began at the switch-in.
        let wall = now.saturating_sub(a.state_since_ns);
        if a.take_irq_clock(c.total_ns, ran.map_or(wall, |r| r.min(wall))) {
            crate::count(stat::IRQ_CAPPED);
        }
    }
    a.flags &= !flag::IRQ_SNAP;
}

/// At a thread's switch-in: the CPU's interrupt clock becomes the base of
/// the run that begins.
#[inline(always)]
pub fn switched_in(a: &mut ThreadAccount) {
    if !irq_on() {
        return;
    }
    if let Some(c) = clock() {
        a.irq_snap_ns = c.total_ns;
        a.flags |= flag::IRQ_SNAP;
    }
}
