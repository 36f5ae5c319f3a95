//! Reading the ledger maps: a consistent-enough copy of every account at one
//! instant, the kernel-side counters, and the exit records.
use std::collections::HashMap as StdHashMap;

use aya::maps::MapError;
use serde::{Deserialize, Serialize};
use ttp_common::{
    CpuAccount, DiskAccount, ExitRecord, IrqClock, ProcDisk, TASK_COMM_LEN, ThreadAccount, flag,
    stat, state,
};

use super::{Ledger, ProbeError, batch};

/// Kernel-side counters, summed over CPUs: losses and failures are reported,
/// never hidden.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelStats {
    pub exit_records_lost: u64,
    pub thread_map_full: u64,
    pub read_failed: u64,
    pub lock_contended: u64,
    pub request_map_full: u64,
    pub proc_disk_map_full: u64,
    pub cpu_out_of_range: u64,
    pub switches: u64,
    pub wakeups_unseen: u64,
    pub exit_records: u64,
    /// Switch-outs of a task that was not the last one seen switched in on
    /// that CPU (a gap in the ledger's view of the CPU; see docs/ledger.md).
    #[serde(default)]
    pub unreported_switches: u64,
    /// Switches of a thread whose previous switch the ledger did not see;
    /// its on-CPU time was recovered from the kernel's sum_exec_runtime.
    #[serde(default)]
    pub switches_unseen: u64,
    /// Trace records that did not fit in the trace ring buffer.
    #[serde(default)]
    pub trace_events_lost: u64,
    #[serde(default)]
    pub trace_events: u64,
    /// Children of traced processes that could not be traced.
    #[serde(default)]
    pub traced_map_full: u64,
    /// Block requests ended when their request was reused: their
    /// completion never reached the tracepoint (docs/ledger.md).
    #[serde(default)]
    pub requests_ended_at_reuse: u64,
    /// With `--irq-time`: runs whose interrupt time was cut to the run's
    /// wall clock (a fault of the interrupt clock).
    #[serde(default)]
    pub irq_capped: u64,
    /// Block requests whose slot another request in flight held, kept in
    /// the overflow hash instead (not a loss; docs/ledger-cost.md, "A slot
    /// a request").
    #[serde(default)]
    pub requests_in_overflow: u64,
}

impl KernelStats {
    fn from_counters(c: &[u64; stat::COUNT as usize]) -> Self {
        Self {
            exit_records_lost: c[stat::EXIT_RECORD_LOST as usize],
            thread_map_full: c[stat::THREAD_MAP_FULL as usize],
            read_failed: c[stat::READ_FAILED as usize],
            lock_contended: c[stat::LOCK_CONTENDED as usize],
            request_map_full: c[stat::REQUEST_MAP_FULL as usize],
            proc_disk_map_full: c[stat::PROC_DISK_MAP_FULL as usize],
            cpu_out_of_range: c[stat::CPU_OUT_OF_RANGE as usize],
            switches: c[stat::SWITCHES as usize],
            wakeups_unseen: c[stat::WAKEUP_UNSEEN as usize],
            exit_records: c[stat::EXIT_RECORDS as usize],
            unreported_switches: c[stat::UNREPORTED_SWITCH as usize],
            switches_unseen: c[stat::SWITCH_UNSEEN as usize],
            trace_events_lost: c[stat::TRACE_EVENT_LOST as usize],
            trace_events: c[stat::TRACE_EVENTS as usize],
            traced_map_full: c[stat::TRACED_MAP_FULL as usize],
            requests_ended_at_reuse: c[stat::REQUEST_END_AT_REUSE as usize],
            irq_capped: c[stat::IRQ_CAPPED as usize],
            requests_in_overflow: c[stat::REQUEST_OVERFLOW as usize],
        }
    }

    /// Counters that mean some measurement was lost or is incomplete.
    pub fn losses(&self) -> u64 {
        self.exit_records_lost
            + self.thread_map_full
            + self.read_failed
            + self.request_map_full
            + self.proc_disk_map_full
            + self.cpu_out_of_range
            + self.trace_events_lost
            + self.traced_map_full
            + self.irq_capped
    }

    /// Change since `earlier` (counters only grow).
    pub fn since(&self, earlier: &Self) -> Self {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        Self {
            exit_records_lost: d(self.exit_records_lost, earlier.exit_records_lost),
            thread_map_full: d(self.thread_map_full, earlier.thread_map_full),
            read_failed: d(self.read_failed, earlier.read_failed),
            lock_contended: d(self.lock_contended, earlier.lock_contended),
            request_map_full: d(self.request_map_full, earlier.request_map_full),
            proc_disk_map_full: d(self.proc_disk_map_full, earlier.proc_disk_map_full),
            cpu_out_of_range: d(self.cpu_out_of_range, earlier.cpu_out_of_range),
            switches: d(self.switches, earlier.switches),
            wakeups_unseen: d(self.wakeups_unseen, earlier.wakeups_unseen),
            exit_records: d(self.exit_records, earlier.exit_records),
            unreported_switches: d(self.unreported_switches, earlier.unreported_switches),
            switches_unseen: d(self.switches_unseen, earlier.switches_unseen),
            trace_events_lost: d(self.trace_events_lost, earlier.trace_events_lost),
            trace_events: d(self.trace_events, earlier.trace_events),
            traced_map_full: d(self.traced_map_full, earlier.traced_map_full),
            requests_ended_at_reuse: d(
                self.requests_ended_at_reuse,
                earlier.requests_ended_at_reuse,
            ),
            irq_capped: d(self.irq_capped, earlier.irq_capped),
            requests_in_overflow: d(self.requests_in_overflow, earlier.requests_in_overflow),
        }
    }
}

/// Every account as read at `at_ns` (CLOCK_MONOTONIC, taken after the maps
/// were read, so it is at or after every `state_since_ns`).
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub at_ns: u64,
    pub threads: Vec<ThreadAccount>,
    /// (cpu id, account) for the CPUs the ledger has seen.
    pub cpus: Vec<(u32, CpuAccount)>,
    pub disk: DiskAccount,
    pub proc_disk: StdHashMap<u32, ProcDisk>,
    pub stats: KernelStats,
    /// (cpu id, interrupt clock) of the online CPUs, read before the
    /// accounts; empty without `--irq-time`.
    pub irq: Vec<(u32, IrqClock)>,
}

fn map_err(map: &str) -> impl Fn(MapError) -> ProbeError + '_ {
    move |source| ProbeError::Map {
        map: map.into(),
        source: Box::new(source),
    }
}

impl Ledger {
    /// Reads every map. Entries that vanish while reading (a thread exits)
    /// are skipped: their exit record carries them.
    pub fn snapshot(&self) -> Result<Snapshot, ProbeError> {
        // Before the accounts: a running thread's interrupt time is then
        // taken up to an instant before its runtime is (never more than
        // the run it is part of).
        let irq = self.irq_clocks()?;
        let mut threads: Vec<ThreadAccount> = match &self.slots {
            Some(_) if self.slot_view.is_some() => self
                .slot_view
                .as_ref()
                .map_or_else(Vec::new, |v| v.values()),
            // A slot holds an account when its tid is the slot's index.
            Some(slots) => batch::array_entries(slots)
                .map_err(map_err("THREAD_SLOTS"))?
                .into_iter()
                .filter(|(tid, a)| *tid != 0 && a.tid == *tid)
                .map(|(_, v)| v)
                .collect(),
            None => batch::hash_entries(&self.threads)
                .map_err(map_err("THREADS"))?
                .into_iter()
                .map(|(_, v)| v)
                .collect(),
        };
        let ran = take_running_counters(&mut threads);
        let cpus = self.cpu_accounts()?;
        take_running_irq(
            &mut threads,
            &ran,
            &irq,
            &cpus,
            ttp_sys::sys::clock::monotonic_ns(),
        );
        let disk = self.disk.get(&0, 0).map_err(map_err("DISK"))?;
        let proc_disk = match (&self.proc_slots, &self.proc_view) {
            (Some(_), Some(view)) => view.values().into_iter().map(|p| (p.tgid, p)).collect(),
            // A slot holds a process's clock when its tgid is the index.
            (Some(slots), None) => batch::array_entries(slots)
                .map_err(map_err("PROC_SLOTS"))?
                .into_iter()
                .filter(|(tgid, p)| *tgid != 0 && p.tgid == *tgid)
                .collect(),
            (None, _) => batch::hash_entries(&self.proc_disk)
                .map_err(map_err("PROC_DISK"))?
                .into_iter()
                .collect::<StdHashMap<_, _>>(),
        };
        let mut counters = [0u64; stat::COUNT as usize];
        for (i, slot) in counters.iter_mut().enumerate() {
            let per_cpu = self.stats.get(&(i as u32), 0).map_err(map_err("STATS"))?;
            *slot = per_cpu.iter().sum();
        }
        let at_ns = ttp_sys::sys::clock::monotonic_ns();
        for a in threads.iter_mut().filter(|a| a.state == state::RUNNING) {
            a.state_since_ns = at_ns;
        }
        Ok(Snapshot {
            at_ns,
            threads,
            cpus,
            disk,
            proc_disk,
            stats: KernelStats::from_counters(&counters),
            irq,
        })
    }

    /// (cpu id, interrupt clock) of the online CPUs; empty without
    /// `--irq-time`.
    fn irq_clocks(&self) -> Result<Vec<(u32, IrqClock)>, ProbeError> {
        let Some(map) = &self.irq else {
            return Ok(Vec::new());
        };
        let per_cpu = map.get(&0, 0).map_err(map_err("IRQ_CLOCK"))?;
        let online = aya::util::online_cpus().unwrap_or_default();
        Ok(online
            .into_iter()
            .filter_map(|cpu| Some((cpu, *per_cpu.get(cpu as usize)?)))
            .collect())
    }

    /// (cpu id, account) of the online CPUs the ledger has seen.
    pub fn cpu_accounts(&self) -> Result<Vec<(u32, CpuAccount)>, ProbeError> {
        let online = aya::util::online_cpus().unwrap_or_default();
        let mut cpus = Vec::with_capacity(online.len());
        for cpu in online {
            let c = self.cpus.get(&cpu, 0).map_err(map_err("CPUS"))?;
            if c.valid != 0 {
                cpus.push((cpu, c));
            }
        }
        Ok(cpus)
    }

    /// Moves every exit record received so far into `out`.
    pub fn drain_exits(&mut self, out: &mut Vec<ExitRecord>) {
        self.exits.drain(out);
    }

    /// Gives threads that existed before the probes attached the state
    /// /proc reports for them, so that time from now on is attributed even
    /// before their first event. Accounts the programs already created are
    /// left alone (BPF_NOEXIST).
    pub fn seed(&mut self, threads: &[SeedThread]) -> usize {
        let now = ttp_sys::sys::clock::monotonic_ns();
        let mut seeded = 0;
        for t in threads {
            let mut a = ThreadAccount::zeroed();
            a.tid = t.tid;
            a.tgid = t.tgid;
            a.start_time_ns = t.start_key;
            a.first_seen_ns = now;
            a.state_since_ns = now;
            a.flags = flag::SEEDED;
            if let Some((exec, run_delay)) = t.sched {
                a.exec_snap_ns = exec;
                a.run_delay_snap_ns = run_delay;
                a.flags |= flag::SCHED_SNAP;
            }
            a.state = match t.state {
                'R' => state::RUNNING,
                'D' => state::BLOCKED,
                _ => state::SLEEPING,
            };
            let n = t.comm.len().min(TASK_COMM_LEN - 1);
            a.comm[..n].copy_from_slice(&t.comm.as_bytes()[..n]);
            const BPF_NOEXIST: u64 = 1;
            let inserted = match &mut self.slots {
                // An array has no BPF_NOEXIST: a slot the programs already
                // filled is read first and left alone. An account they
                // create between the read and the write is replaced by
                // this one; its on-CPU and run-queue wait still count
                // from the kernel's counters (the seed's base), only its
                // first event's state is lost.
                Some(slots) => {
                    let taken = slots.get(&t.tid, 0).is_ok_and(|b| b.tid == t.tid);
                    !taken && slots.set(t.tid, a, 0).is_ok()
                }
                None => self.threads.insert(t.tid, a, BPF_NOEXIST).is_ok(),
            };
            if inserted {
                seeded += 1;
            }
        }
        seeded
    }
}

impl Ledger {
    /// The kernel's account of thread `tid`, if it has one.
    pub fn account(&self, tid: u32) -> Option<ThreadAccount> {
        match &self.slots {
            Some(slots) => slots.get(&tid, 0).ok().filter(|a| a.tid == tid && tid != 0),
            None => self.threads.get(&tid, 0).ok(),
        }
    }

    /// Replaces the account of `a.tid`. Only for tests that put an account
    /// in the state the kernel would leave after missing a switch, to check
    /// that the ledger recovers (tests/tests/ledger.rs).
    #[doc(hidden)]
    pub fn replace_account_for_test(&mut self, a: &ThreadAccount) -> Result<(), MapError> {
        const BPF_EXIST: u64 = 2;
        match &mut self.slots {
            Some(slots) => slots.set(a.tid, *a, 0),
            None => self.threads.insert(a.tid, *a, BPF_EXIST),
        }
    }
}

/// A thread found in /proc at attach time.
#[derive(Debug, Clone)]
pub struct SeedThread {
    pub tid: u32,
    pub tgid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// /proc state letter (R, S, D, I, T, …).
    pub state: char,
    pub comm: String,
    /// Start time as /proc gives it (ticks since boot), kept only to tell a
    /// reused tid apart.
    pub start_key: u64,
    /// (sum_exec_runtime, run_delay) ns from /proc/TID/schedstat: the base
    /// its on-CPU and run-queue wait count from.
    pub sched: Option<(u64, u64)>,
}

/// `/proc/TID/schedstat`: (sum_exec_runtime, run_delay) ns, the kernel's
/// counters the ledger reads at every switch (proc_pid_schedstat; the
/// running thread's runtime is brought up to date at each tick).
pub fn schedstat(tid: u32) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/schedstat")).ok()?;
    let mut f = text.split_ascii_whitespace().map(|v| v.parse::<u64>().ok());
    Some((f.next()??, f.next()??))
}

/// Takes, for every thread the ledger has on a CPU that still shows it
/// current, the interrupt time of its open run as of the clocks' read, by
/// the rule the kernel takes it with at the switch-out
/// (`ThreadAccount::take_irq_clock`, ttp_common::clocks), cut to the
/// runtime `ran[i]` thread `i` gained since the last read where there is
/// one. A thread whose switch-out was missed adds nothing: the CPU runs
/// another.
fn take_running_irq(
    threads: &mut [ThreadAccount],
    ran: &[Option<u64>],
    irq: &[(u32, IrqClock)],
    cpus: &[(u32, CpuAccount)],
    now: u64,
) {
    if irq.is_empty() {
        return;
    }
    for (a, ran) in threads
        .iter_mut()
        .zip(ran)
        .filter(|(a, _)| a.state == state::RUNNING)
    {
        let current = cpus
            .iter()
            .any(|(id, c)| *id == a.run_cpu && c.current_tid == a.tid);
        if let Some((_, clock)) = irq.iter().find(|(id, _)| *id == a.run_cpu)
            && current
            && a.flags & flag::IRQ_SNAP != 0
        {
            // A cut here is the one the switch-out counts when the run
            // ends (`stat::IRQ_CAPPED`); this copy is not counted again.
            let wall = now.saturating_sub(a.state_since_ns);
            let _cut = a.take_irq_clock(clock.total_ns, ran.map_or(wall, |r| r.min(wall)));
        }
    }
}

/// Closes the open interval of every thread the ledger has on a CPU with the
/// kernel's own counters as of now, by the rule the kernel takes them with
/// at the switches (`ThreadAccount::take_sched_counters`,
/// ttp_common::clocks): a thread whose switch-out the tracepoint missed is
/// never charged the CPU's idle time. A thread that is gone adds nothing (its exit record carries it).
/// The caller moves `state_since_ns` to the snapshot's instant. Returns,
/// per thread, the runtime it gained since the last read (None: not on a
/// CPU, gone, or no base).
fn take_running_counters(threads: &mut [ThreadAccount]) -> Vec<Option<u64>> {
    threads
        .iter_mut()
        .map(|a| {
            if a.state != state::RUNNING {
                return None;
            }
            let (exec, run_delay) = schedstat(a.tid)?;
            a.take_sched_counters(exec, Some(run_delay))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(tid: u32, cpu: u32, since: u64, snap: Option<u64>) -> ThreadAccount {
        let mut a = ThreadAccount::zeroed();
        a.tid = tid;
        a.state = state::RUNNING;
        a.run_cpu = cpu;
        a.state_since_ns = since;
        if let Some(s) = snap {
            a.irq_snap_ns = s;
            a.flags |= flag::IRQ_SNAP;
        }
        a
    }

    fn cpu_running(tid: u32) -> CpuAccount {
        CpuAccount {
            current_tid: tid,
            switch_seen: 1,
            valid: 1,
            ..Default::default()
        }
    }

    fn clock(total_ns: u64) -> IrqClock {
        IrqClock {
            total_ns,
            ..Default::default()
        }
    }

    /// Catches a running thread charged with interrupts of a CPU that no
    /// longer runs it (its switch-out was missed), a thread without a
    /// base charged with the CPU's whole history, a sleeping thread
    /// charged at all, or the open run's share taken beyond its length:
    /// only a thread its CPU shows current takes the clock's growth since
    /// its switch-in, at most the run's wall clock and the runtime it
    /// gained (a steal inside a handler is in the clock, not the runtime).
    #[test]
    fn only_a_current_run_takes_its_interrupts() {
        let mut threads = vec![
            running(10, 0, 1_000, Some(500)),
            // CPU 1 shows thread 99: 11's switch-out was missed.
            running(11, 1, 1_000, Some(100)),
            // Seeded as running from /proc: no base.
            running(12, 3, 1_000, None),
            // Its run began 100 ns before the read.
            running(13, 2, 9_900, Some(0)),
        ];
        let mut asleep = running(14, 0, 1_000, Some(0));
        asleep.state = state::SLEEPING;
        threads.push(asleep);
        // Ran 300 ns of its 9 000 ns run; the clock grew by 4 000 ns.
        threads.push(running(15, 4, 1_000, Some(0)));
        let irq = [
            (0, clock(2_500)),
            (1, clock(9_000)),
            (2, clock(5_000)),
            (3, clock(7_000)),
            (4, clock(4_000)),
        ];
        let cpus = [
            (0, cpu_running(10)),
            (1, cpu_running(99)),
            (2, cpu_running(13)),
            (3, cpu_running(12)),
            (4, cpu_running(15)),
        ];
        let ran = [Some(5_000), None, None, None, None, Some(300)];
        take_running_irq(&mut threads, &ran, &irq, &cpus, 10_000);
        let got: Vec<u64> = threads.iter().map(|a| a.irq_ns).collect();
        assert_eq!(got, [2_000, 0, 0, 100, 0, 300]);
    }
}
