//! The ledger's clocks brought up to an instant: one rule, used by the
//! kernel programs at every event and by userspace when it closes an
//! image "as of" its instant (docs/ledger.md, "The two exact I/O
//! measures"). Pure arithmetic on the shared records: what differs between
//! the two sides (locks, maps, a copy or the live value) is passed in.
use crate::{CpuAccount, DiskAccount, IrqClock, ProcDisk, ThreadAccount, flag, state};

impl CpuAccount {
    /// Books the account up to `now`: busy time, or, in the idle state,
    /// idle or iowait by the count of tasks in iowait that held since the
    /// last booking; each of those tasks' shares (`share_cum_ns`) grows by
    /// that time over the count (TTPv2 Sec. 12: a CPU's iowait is split
    /// among the tasks that wait on it). The first call only starts the
    /// clock.
    #[inline(always)]
    pub fn advance(&mut self, now: u64) {
        if self.valid != 0 && now > self.since_ns {
            let dt = now - self.since_ns;
            if self.idle == 0 {
                self.busy_ns += dt;
            } else {
                // Read once: in the kernel the count changes by atomic
                // adds, not all of them under the lock (a switch-out adds
                // on its own busy CPU without it).
                // SAFETY: a plain read of a field of `self`.
                let n = unsafe { core::ptr::read_volatile(&raw const self.nr_iowait) };
                // A count above 2^63 is a decrement that raced below zero
                // and is being undone: idle, not iowait.
                if n > 0 && n < 1 << 63 {
                    self.iowait_ns += dt;
                    self.share_cum_ns += dt / n;
                } else {
                    self.idle_ns += dt;
                }
            }
        }
        if self.valid == 0 || now > self.since_ns {
            self.since_ns = now;
        }
        self.valid = 1;
    }
}

impl IrqClock {
    /// A handler enters at `now`: the outermost one starts the clock.
    #[inline(always)]
    pub fn enter(&mut self, now: u64, soft: bool) {
        if self.depth == 0 {
            self.entry_ns = now;
            self.outer_soft = soft as u32;
        }
        // Bounded: an exit never seen (it cannot happen for these
        // tracepoints, but a stuck count would stop the clock for good)
        // only deepens the count so far.
        if self.depth < 16 {
            self.depth += 1;
        }
        if soft {
            self.soft_count += 1;
        } else {
            self.hard_count += 1;
        }
    }

    /// A handler exits at `now`: the outermost one adds its time. An exit
    /// whose entry was not seen (the programs attached while a handler
    /// ran) adds nothing.
    #[inline(always)]
    pub fn exit(&mut self, now: u64) {
        if self.depth == 0 {
            return;
        }
        self.depth -= 1;
        if self.depth == 0 {
            let dt = now.saturating_sub(self.entry_ns);
            self.total_ns += dt;
            if self.outer_soft != 0 {
                self.soft_ns += dt;
            }
        }
    }
}

impl DiskAccount {
    /// Brings the "whose I/O is the disk serving" clock up to `now`:
    /// `g_cum_ns` grows at 1/n while n processes have requests in service.
    #[inline(always)]
    pub fn advance(&mut self, now: u64) {
        if now > self.last_ns {
            let dt = now - self.last_ns;
            if self.busy_procs > 0 {
                self.g_cum_ns += dt / self.busy_procs as u64;
                self.busy_ns += dt;
            }
            self.last_ns = now;
        }
    }
}

impl ProcDisk {
    /// The process's own-I/O clock when the disk's clock reads `g_cum_ns`:
    /// its closed in-service periods plus the open one.
    #[inline(always)]
    pub fn own_at(&self, g_cum_ns: u64) -> u64 {
        if self.inflight > 0 {
            self.own_cum_ns + g_cum_ns.saturating_sub(self.g_snap_ns)
        } else {
            self.own_cum_ns
        }
    }
}

/// Where closing an open iowait interval reads its two clocks.
pub trait WaitClocks {
    /// The iowait-share clock (`CpuAccount::share_cum_ns`) of `cpu` at
    /// `now`, for a wait counted there that ends. The kernel side also
    /// drops the CPU's count of tasks in iowait here. None when the clock
    /// cannot be read (a contended lock, an unknown CPU): that wait's
    /// share is not counted.
    fn end_iowait_share(&mut self, cpu: u32, now: u64) -> Option<u64>;
    /// Process `tgid`'s own-I/O clock at `now`; None when it cannot be read.
    fn own_clock(&mut self, tgid: u32, now: u64) -> Option<u64>;
}

/// What the side that closes knows better than the clock.
#[derive(Clone, Copy, Debug)]
pub struct Closing {
    /// On-CPU time of a running thread grows by the clock. The kernel side
    /// reads the kernel's runtime at the switch-out instead; an image has
    /// already read a running thread's runtime as of its instant, so only
    /// an account built by hand grows here.
    pub on_cpu_by_clock: bool,
    /// Run-queue wait grows by the clock: only where the kernel keeps no
    /// `run_delay` (no CONFIG_SCHED_INFO, docs/ledger.md). Elsewhere an
    /// open wait is not in `run_delay` until the switch-in ends it, and
    /// shows only as wake latency.
    pub runq_by_clock: bool,
}

impl ThreadAccount {
    /// Closes the open interval (the thread's state since
    /// `state_since_ns`) at `now`: its length goes to the state's counter,
    /// and an iowait wait counted on a CPU takes its share of that CPU's
    /// iowait and its process's own-I/O time over the wait (TTPv2 Sec. 12,
    /// `IO_calc`'s two terms measured rather than estimated;
    /// docs/ledger.md). The interval restarts at `now`.
    #[inline(always)]
    pub fn close_interval<C: WaitClocks>(&mut self, now: u64, how: Closing, clocks: &mut C) {
        let dt = now.saturating_sub(self.state_since_ns);
        match self.state {
            state::RUNNING if how.on_cpu_by_clock => self.on_cpu_ns += dt,
            state::RUNNABLE => {
                self.wake_latency_ns += dt;
                if how.runq_by_clock {
                    self.runq_wait_ns += dt;
                }
            }
            state::SLEEPING => self.sleep_ns += dt,
            state::BLOCKED => self.blocked_ns += dt,
            state::IOWAIT => {
                self.iowait_ns += dt;
                if self.flags & flag::IOWAIT_COUNTED != 0 {
                    self.flags &= !flag::IOWAIT_COUNTED;
                    if let Some(share) = clocks.end_iowait_share(self.iowait_cpu, now) {
                        self.iowait_share_ns += share.saturating_sub(self.share_snap);
                    }
                    if self.flags & flag::OWN_UNKNOWN == 0
                        && let Some(own) = clocks.own_clock(self.tgid, now)
                    {
                        // Never more than the wait itself: a wait closed at
                        // a back-dated wake-up (ttp-ebpf/src/sched.rs
                        // `wake_instant`) reads the own-I/O clock after the
                        // request's completion (`block_io_done` runs after
                        // the waiter was woken).
                        self.iowait_own_ns += own.saturating_sub(self.own_snap).min(dt);
                    }
                    self.flags &= !flag::OWN_UNKNOWN;
                }
            }
            _ => {}
        }
        self.state_since_ns = now;
    }

    /// Takes the scheduler's own counters of the thread, read now: its
    /// runtime `exec` (`se.sum_exec_runtime`, /proc/TID/schedstat's first
    /// field) and run-queue wait `run_delay` (`sched_info.run_delay`, the
    /// second; None without CONFIG_SCHED_INFO). On-CPU time and run-queue
    /// wait grow by what the counters grew since the last read
    /// ([`flag::SCHED_SNAP`]), never by wall time; the read becomes the
    /// next one's base. Returns the runtime's growth, None on the first
    /// read (nothing to grow from). The kernel takes them at the switches
    /// (ttp-ebpf/src/sched.rs), a reader for the threads on a CPU when it
    /// closes an image (ttp-ledger/src/probe/read.rs).
    #[inline(always)]
    pub fn take_sched_counters(&mut self, exec: u64, run_delay: Option<u64>) -> Option<u64> {
        let ran = if self.flags & flag::SCHED_SNAP != 0 {
            let ran = exec.saturating_sub(self.exec_snap_ns);
            self.on_cpu_ns += ran;
            if let Some(rd) = run_delay {
                self.runq_wait_ns += rd.saturating_sub(self.run_delay_snap_ns);
            }
            Some(ran)
        } else {
            None
        };
        self.exec_snap_ns = exec;
        self.run_delay_snap_ns = run_delay.unwrap_or(0);
        self.flags |= flag::SCHED_SNAP;
        ran
    }

    /// Takes the interrupt clock (`IrqClock::total_ns`) of the CPU the
    /// thread runs on, read now: `irq_ns` grows by the clock's growth
    /// since the switch-in that began the run ([`flag::IRQ_SNAP`]), and
    /// the read becomes the next one's base. The kernel takes it at the
    /// switch-out (the run's interrupts, all of them charged to the
    /// thread's runtime on this kernel) and stores it at the switch-in; a
    /// reader takes it for a thread on a CPU when it closes an image, as
    /// it takes the runtime ([`ThreadAccount::take_sched_counters`]).
    /// The growth is at most `cap_ns`: the runtime the run gained where
    /// the caller has it, which holds the run's interrupts on this kernel,
    /// else the wall clock since the run began. The clock is wall time, the
    /// runtime leaves out what the hypervisor stole (PARAVIRT time
    /// accounting): a steal inside a handler, or a switch the tracepoint
    /// never fired, makes the growth longer. True when it was longer and
    /// was cut: the caller counts it (`stat::IRQ_CAPPED`).
    #[inline(always)]
    pub fn take_irq_clock(&mut self, total_ns: u64, cap_ns: u64) -> bool {
        let mut cut = false;
        if self.flags & flag::IRQ_SNAP != 0 {
            let grew = total_ns.saturating_sub(self.irq_snap_ns);
            cut = grew > cap_ns;
            self.irq_ns += grew.min(cap_ns);
        }
        self.irq_snap_ns = total_ns;
        self.flags |= flag::IRQ_SNAP;
        cut
    }
}

#[cfg(test)]
mod tests;
