//! The shared close rule on hand-built accounts whose answer is known.
use super::*;

/// Clocks that answer fixed values and count what they were asked.
struct Fixed {
    share: Option<u64>,
    own: Option<u64>,
    asked: (u32, u32),
}

impl WaitClocks for Fixed {
    fn end_iowait_share(&mut self, _cpu: u32, _now: u64) -> Option<u64> {
        self.asked.0 += 1;
        self.share
    }
    fn own_clock(&mut self, _tgid: u32, _now: u64) -> Option<u64> {
        self.asked.1 += 1;
        self.own
    }
}

const EVENT: Closing = Closing {
    on_cpu_by_clock: false,
    runq_by_clock: false,
};

fn waiting(since: u64, share_snap: u64, own_snap: u64) -> ThreadAccount {
    ThreadAccount {
        state: state::IOWAIT,
        state_since_ns: since,
        flags: flag::IOWAIT_COUNTED,
        share_snap,
        own_snap,
        ..ThreadAccount::zeroed()
    }
}

#[test]
fn an_iowait_wait_takes_its_cpu_share_and_its_own_io() {
    let mut a = waiting(1_000, 40, 100);
    let mut c = Fixed {
        share: Some(340),
        own: Some(700),
        asked: (0, 0),
    };
    a.close_interval(2_000, EVENT, &mut c);
    assert_eq!(a.iowait_ns, 1_000);
    assert_eq!(a.iowait_share_ns, 300);
    assert_eq!(a.iowait_own_ns, 600);
    assert_eq!(a.state_since_ns, 2_000);
    assert_eq!(a.flags & (flag::IOWAIT_COUNTED | flag::OWN_UNKNOWN), 0);
    // Closed once: closing again books the new stretch, no share twice.
    a.close_interval(2_500, EVENT, &mut c);
    assert_eq!((a.iowait_ns, a.iowait_share_ns), (1_500, 300));
    assert_eq!(c.asked, (1, 1));
}

#[test]
fn own_io_is_never_more_than_the_wait() {
    let mut a = waiting(1_000, 0, 0);
    let mut c = Fixed {
        share: Some(0),
        own: Some(5_000),
        asked: (0, 0),
    };
    a.close_interval(2_000, EVENT, &mut c);
    assert_eq!(a.iowait_own_ns, 1_000);
}

#[test]
fn an_unreadable_clock_loses_only_its_own_part() {
    let mut a = waiting(0, 0, 0);
    a.flags |= flag::OWN_UNKNOWN;
    let mut c = Fixed {
        share: None,
        own: Some(10),
        asked: (0, 0),
    };
    a.close_interval(100, EVENT, &mut c);
    assert_eq!(
        (a.iowait_ns, a.iowait_share_ns, a.iowait_own_ns),
        (100, 0, 0)
    );
    // The own clock is not even read for a wait that began without it.
    assert_eq!(c.asked, (1, 0));
    assert_eq!(a.flags, 0);
}

#[test]
fn what_the_closing_side_knows_better_than_the_clock() {
    let mut c = Fixed {
        share: None,
        own: None,
        asked: (0, 0),
    };
    let mut run = ThreadAccount {
        state: state::RUNNING,
        state_since_ns: 10,
        ..ThreadAccount::zeroed()
    };
    run.close_interval(30, EVENT, &mut c);
    assert_eq!(run.on_cpu_ns, 0, "the kernel side reads runtime instead");
    let by_clock = Closing {
        on_cpu_by_clock: true,
        runq_by_clock: true,
    };
    run.close_interval(50, by_clock, &mut c);
    assert_eq!(run.on_cpu_ns, 20);
    let mut queued = ThreadAccount {
        state: state::RUNNABLE,
        state_since_ns: 0,
        ..ThreadAccount::zeroed()
    };
    queued.close_interval(7, EVENT, &mut c);
    assert_eq!((queued.wake_latency_ns, queued.runq_wait_ns), (7, 0));
    queued.close_interval(10, by_clock, &mut c);
    assert_eq!((queued.wake_latency_ns, queued.runq_wait_ns), (10, 3));
    assert_eq!(c.asked, (0, 0));
}

#[test]
fn a_cpu_books_busy_idle_and_iowait_and_splits_iowait_by_the_count() {
    let mut c = CpuAccount::default();
    c.advance(100); // starts the clock only
    assert_eq!(
        (c.busy_ns, c.idle_ns, c.iowait_ns, c.since_ns),
        (0, 0, 0, 100)
    );
    c.advance(150);
    assert_eq!(c.busy_ns, 50);
    c.idle = 1;
    c.advance(250);
    assert_eq!(c.idle_ns, 100);
    c.nr_iowait = 4;
    c.advance(650);
    assert_eq!((c.iowait_ns, c.share_cum_ns), (400, 100));
    // A decrement racing below zero reads as idle, not as 2^64 waiters.
    c.nr_iowait = u64::MAX;
    c.advance(700);
    assert_eq!((c.idle_ns, c.iowait_ns), (150, 400));
    // An earlier instant (another CPU's clock) books nothing.
    c.advance(690);
    assert_eq!(
        (c.since_ns, c.busy_ns + c.idle_ns + c.iowait_ns),
        (700, 600)
    );
}

#[test]
fn the_disk_clock_splits_service_among_the_processes_in_it() {
    let mut d = DiskAccount {
        busy_procs: 2,
        last_ns: 1_000,
        ..Default::default()
    };
    d.advance(1_600);
    assert_eq!((d.g_cum_ns, d.busy_ns), (300, 600));
    let p = ProcDisk {
        inflight: 1,
        g_snap_ns: 100,
        own_cum_ns: 50,
        ..Default::default()
    };
    assert_eq!(p.own_at(d.g_cum_ns), 250);
    let idle = ProcDisk { inflight: 0, ..p };
    assert_eq!(idle.own_at(d.g_cum_ns), 50);
}

/// Catches the scheduler's counters taken as totals rather than growth, a
/// first read that adds its whole count, or a missing run-queue count
/// taken as zero growth's base wrongly: on-CPU and run-queue wait grow by
/// the counters' differences between reads.
#[test]
fn scheduler_counters_grow_by_their_differences() {
    let mut a = ThreadAccount::zeroed();
    assert_eq!(a.take_sched_counters(5_000, Some(700)), None);
    assert_eq!((a.on_cpu_ns, a.runq_wait_ns), (0, 0));
    assert_eq!(a.take_sched_counters(8_000, Some(1_000)), Some(3_000));
    assert_eq!((a.on_cpu_ns, a.runq_wait_ns), (3_000, 300));
    // Without CONFIG_SCHED_INFO: no run-queue wait, the runtime still grows.
    assert_eq!(a.take_sched_counters(9_500, None), Some(1_500));
    assert_eq!((a.on_cpu_ns, a.runq_wait_ns), (4_500, 300));
    assert_eq!((a.exec_snap_ns, a.run_delay_snap_ns), (9_500, 0));
    assert_ne!(a.flags & flag::SCHED_SNAP, 0);
}

/// Catches a hard interrupt inside a softirq counted twice, an exit
/// without its entry (programs attached mid-handler) adding time from an
/// old stamp, or the softirq part taken from the inner handler: the clock
/// adds the outermost handler's span once.
#[test]
fn the_interrupt_clock_counts_nested_handlers_once() {
    let mut c = IrqClock::default();
    // An exit whose entry was never seen.
    c.exit(500);
    assert_eq!((c.total_ns, c.depth), (0, 0));
    // A softirq from 1 000 to 4 000 with a hard interrupt inside it.
    c.enter(1_000, true);
    c.enter(2_000, false);
    c.exit(2_500);
    assert_eq!(c.total_ns, 0);
    c.exit(4_000);
    assert_eq!((c.total_ns, c.soft_ns), (3_000, 3_000));
    // A hard interrupt alone, 10 000 to 10 400.
    c.enter(10_000, false);
    c.exit(10_400);
    assert_eq!((c.total_ns, c.soft_ns), (3_400, 3_000));
    assert_eq!((c.hard_count, c.soft_count, c.depth), (2, 1, 0));
}

/// Catches the clock's total taken instead of its growth, a first read
/// (no base) that adds the CPU's whole history, or the base not moved:
/// `irq_ns` grows by the clock's growth between reads.
#[test]
fn interrupt_time_grows_by_the_clocks_growth_since_the_switch_in() {
    let mut a = ThreadAccount::zeroed();
    assert!(!a.take_irq_clock(90_000, u64::MAX));
    assert_eq!(a.irq_ns, 0);
    assert!(!a.take_irq_clock(90_700, u64::MAX));
    assert_eq!((a.irq_ns, a.irq_snap_ns), (700, 90_700));
    // Never more than the cap (the run's runtime, else its wall clock).
    assert!(a.take_irq_clock(91_000, 200), "a cut is reported");
    assert_eq!((a.irq_ns, a.irq_snap_ns), (900, 91_000));
    assert_ne!(a.flags & flag::IRQ_SNAP, 0);
}

/// The run-queue clock's offset: none before a sample; the smallest
/// sample of the horizon kept (a larger one is a clock read long after
/// its update); an old one gives way; a negative offset (the run-queue
/// clock ahead, as on this VM) places an instant before the clock's value.
#[test]
fn clock_offset_keeps_the_smallest_sample_of_the_horizon() {
    let mut o = crate::ClockOffset::default();
    assert_eq!(o.monotonic(5_000), None);
    let rq_ahead = 2_460_000u64;
    // now − clock = −2.46 ms: the first sample.
    o.sample(10_000_000, 10_000_000 + rq_ahead);
    assert_eq!(o.monotonic(20_000_000 + rq_ahead), Some(20_000_000));
    // The clock 15 µs stale: larger, not kept.
    o.sample(30_000_000, 30_000_000 + rq_ahead - 15_000);
    assert_eq!(o.monotonic(20_000_000 + rq_ahead), Some(20_000_000));
    // 200 ns closer: kept.
    o.sample(40_000_000, 40_000_000 + rq_ahead + 200);
    assert_eq!(o.monotonic(20_000_000 + rq_ahead), Some(19_999_800));
    // Past the horizon any sample replaces it.
    let later = 40_000_000 + crate::ClockOffset::HORIZON_NS + 1;
    o.sample(later, later + rq_ahead - 1_000);
    assert_eq!(o.monotonic(20_000_000 + rq_ahead), Some(20_001_000));
}
