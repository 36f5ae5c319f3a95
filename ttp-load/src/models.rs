//! The two ways of generating load the paper compares (Sec. 2–3).
//!
//! * Open model (Sec. 3, NoSQLMark's Listing 2): request i is sent at its
//!   intended time whether or not earlier ones have completed; only the
//!   in-flight bound can hold it back, and then it waits in a client-side
//!   queue while its latency keeps counting from its intended time.
//! * Closed model (Sec. 2, YCSB's Listing 1): N connections, each sending
//!   its next request only after the previous response, then sleeping until
//!   its next deadline. Its latency is measured from the actual send
//!   (uncorrected) and, as YCSB's correction (Sec. 2.1), from the deadline.
//!
//! Both record into the same [`Recorder`]: completion − intended start and
//! completion − actual send; the model decides what those are called.
use std::{
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll, Waker},
    time::{Duration, Instant},
};

use tokio::sync::{Notify, Semaphore};

use super::{
    PhasePlan,
    clock::Clock,
    histograms::Recorder,
    schedule::Schedule,
    sender::{PreciseSleeper, SenderStats, ThreadSchedstat, voluntary_switches},
    targets::{RequestError, RequestFuture, Target},
};

/// What a model counted besides the recorder's measurements (all for
/// measured requests: intended start in [warm-up, warm-up + duration)).
#[derive(Debug, Clone, Copy, Default)]
pub struct ModelCounts {
    /// Requests the schedule asked for.
    pub scheduled: u64,
    /// Open model: requests never sent — still queued behind the in-flight
    /// bound, or the generator too far behind, when the run ended at the
    /// end of the grace period (counted as errors of kind `not_sent`).
    pub not_sent: u64,
    /// Closed model: scheduled requests no connection got to before the run
    /// ended — the measurements coordinated omission leaves out.
    pub omitted: u64,
    /// Open model with `--latency-limit`: requests not sent because they
    /// were already later than the limit when they were due (pgbench's
    /// "skipped").
    pub skipped: u64,
    /// Nanoseconds from the phase start to the end of the drain.
    pub elapsed_ns: u64,
    /// Open model on the real clock: what its sender thread spent and saw.
    pub sender: Option<SenderStats>,
}

pub(crate) fn lock(rec: &Mutex<Recorder>) -> MutexGuard<'_, Recorder> {
    rec.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Everything a model's tasks share.
#[derive(Clone)]
pub(crate) struct Ctx {
    pub clock: Clock,
    pub target: Arc<dyn Target>,
    pub rec: Arc<Mutex<Recorder>>,
    pub plan: PhasePlan,
    /// The phase's time zero on `clock`.
    pub t0_ns: u64,
}

impl Ctx {
    fn now(&self) -> u64 {
        self.clock.now_ns().saturating_sub(self.t0_ns)
    }

    /// End of the schedule: requests intended from here on are not sent.
    fn end_ns(&self) -> u64 {
        self.plan.warmup_ns + self.plan.duration_ns
    }

    /// End of the run: requests intended before `end_ns` may still be sent
    /// (late) and completed until the grace period is over; whatever is
    /// left then is `not_sent` (open model), omitted (closed model) or
    /// `unfinished`.
    fn cutoff_ns(&self) -> u64 {
        self.end_ns() + self.plan.grace_ns
    }

    async fn sleep_until(&self, t_ns: u64) {
        if self.now() < t_ns {
            self.clock.sleep_until(self.t0_ns + t_ns).await;
        }
    }

    /// Awaits `fut`, giving up after the per-request timeout if one is set.
    async fn with_timeout(&self, fut: RequestFuture, sent_ns: u64) -> Result<(), RequestError> {
        match self.plan.timeout_ns {
            None => fut.await,
            Some(t) => {
                tokio::select! {
                    biased;
                    r = fut => r,
                    _ = self.clock.sleep_until(self.t0_ns + sent_ns + t) => Err(RequestError::Timeout),
                }
            }
        }
    }

    /// Measured requests left in `schedule` (consumed).
    fn count_measured_left(&self, schedule: &mut Schedule) -> u64 {
        let _warmup = schedule.count_before(self.plan.warmup_ns);
        schedule.count_before(self.end_ns())
    }

    fn measured(&self, intended_ns: u64) -> bool {
        intended_ns >= self.plan.warmup_ns && intended_ns < self.end_ns()
    }

    /// Ends the phase's recording: requests still in flight become
    /// `unfinished` errors.
    fn finish(&self, counts: &mut ModelCounts) {
        let mut rec = lock(&self.rec);
        let unfinished = rec.sent.saturating_sub(rec.ok + rec.failed);
        rec.count_error("unfinished".into(), unfinished);
        rec.count_error("not_sent".into(), counts.not_sent);
        rec.close();
        counts.elapsed_ns = self.now();
    }
}

/// Counts tasks in flight and wakes a waiter when none are left.
struct InFlight {
    n: AtomicU64,
    idle: Notify,
}

impl InFlight {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            n: AtomicU64::new(0),
            idle: Notify::new(),
        })
    }

    fn start(&self) {
        self.n.fetch_add(1, Ordering::AcqRel);
    }

    fn done(&self) {
        if self.n.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle.notify_one();
        }
    }

    /// Waits until nothing is in flight or the clock reaches `deadline_ns`.
    async fn drain(&self, ctx: &Ctx, deadline_ns: u64) {
        loop {
            let notified = self.idle.notified();
            if self.n.load(Ordering::Acquire) == 0 {
                return;
            }
            tokio::select! {
                biased;
                _ = notified => {}
                _ = ctx.clock.sleep_until(ctx.t0_ns + deadline_ns) => return,
            }
        }
    }
}

/// The open model (Sec. 3). Ends at warm-up + duration + grace at the latest.
/// On the real clock the schedule runs on a sender thread ([`super::sender`]),
/// on the virtual clock as a task.
pub(crate) async fn run_open(ctx: Ctx) -> ModelCounts {
    if let Clock::Real { origin, handle } = &ctx.clock {
        let (origin, handle) = (origin.into_std(), handle.clone());
        let in_flight = InFlight::new();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (c, f) = (ctx.clone(), in_flight.clone());
        let spawned = std::thread::Builder::new()
            .name("ttp-load-send".into())
            .spawn(move || {
                let _ = tx.send(send_open_schedule(&c, &f, origin, &handle));
            });
        match spawned {
            Ok(_) => {
                let mut counts = rx.await.unwrap_or_default();
                in_flight.drain(&ctx, ctx.cutoff_ns()).await;
                ctx.finish(&mut counts);
                return counts;
            }
            Err(e) => log::warn!("no sender thread ({e}); sending from the runtime's timers"),
        }
    }
    run_open_on_timers(ctx).await
}

/// The open model's schedule on the sender thread: sleeps precisely to each
/// intended time, starts the request on this thread (its first poll) and
/// hands the rest to the runtime. Returns when the schedule is sent or the
/// run's cutoff passed.
fn send_open_schedule(
    ctx: &Ctx,
    in_flight: &Arc<InFlight>,
    origin: Instant,
    handle: &tokio::runtime::Handle,
) -> ModelCounts {
    let plan = ctx.plan;
    let end = ctx.end_ns();
    let permits = Arc::new(Semaphore::new(plan.max_in_flight));
    let mut schedule = Schedule::new(plan.rate_per_s, plan.arrivals, plan.seed);
    let mut counts = ModelCounts::default();
    let mut sleeper = PreciseSleeper::for_this_thread(plan.realtime_sender);
    let mut schedstat = ThreadSchedstat::open();
    // On-CPU + run-queue wait of this thread so far (ns).
    let mut run_delay = || {
        schedstat
            .as_mut()
            .and_then(ThreadSchedstat::read)
            .map(|(cpu, wait)| (cpu, cpu + wait))
    };
    let first_delay = run_delay();
    let first_switches = voluntary_switches();
    // The run-queue wait read when the sender was last ahead of schedule: a
    // request sent late owes its lag to what happened since then (a CPU
    // wait before request k delays k, k+1, … until the sender catches up).
    let mut on_time_delay = first_delay;
    let base = origin + Duration::from_nanos(ctx.t0_ns);
    let mut sends = Recorder::new(plan.warmup_ns, end, plan.grace_ns);
    while let Some(intended) = schedule.next() {
        if intended >= end {
            break;
        }
        let measured = ctx.measured(intended);
        counts.scheduled += u64::from(measured);
        let due = base + Duration::from_nanos(intended);
        if Instant::now() < due {
            on_time_delay = run_delay();
        }
        sleeper.sleep_until(due);
        // Bounded in-flight: when the bound is hit the request waits here,
        // its latency still counting from `intended`.
        let permit = match permits.clone().try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) => handle.block_on(async {
                tokio::select! {
                    biased;
                    p = permits.clone().acquire_owned() => p.ok(),
                    _ = ctx.clock.sleep_until(ctx.t0_ns + ctx.cutoff_ns()) => None,
                }
            }),
        };
        let sent = ctx.now();
        let Some(permit) = permit.filter(|_| sent < ctx.cutoff_ns()) else {
            let left = ctx.count_measured_left(&mut schedule);
            counts.not_sent += u64::from(measured) + left;
            counts.scheduled += left;
            break;
        };
        if plan
            .latency_limit_ns
            .is_some_and(|l| sent.saturating_sub(intended) > l)
        {
            counts.skipped += u64::from(measured);
            continue;
        }
        let delay_after = run_delay();
        let waited = on_time_delay
            .zip(delay_after)
            .map(|((_, a), (_, b))| b.saturating_sub(a));
        sends.on_send_waited(intended, sent, waited);
        in_flight.start();
        // The request starts here: a target's first poll sends (a TCP
        // request's write, a PostgreSQL query handed to its connection).
        let _enter = handle.enter();
        let mut fut = ctx.target.call();
        let first = fut.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        let (task_ctx, task_in_flight) = (ctx.clone(), in_flight.clone());
        let finish = move |result: Result<(), RequestError>| {
            let done = task_ctx.now();
            lock(&task_ctx.rec).on_complete(intended, sent, done, &result);
            drop(permit);
            task_in_flight.done();
        };
        match first {
            Poll::Ready(result) => finish(result),
            Poll::Pending => {
                let c = ctx.clone();
                handle.spawn(async move { finish(c.with_timeout(fut, sent).await) });
            }
        }
    }
    lock(&ctx.rec).merge_sends(&sends);
    let stats = &mut sleeper.stats;
    if let (Some((cpu0, both0)), Some((cpu1, both1))) = (first_delay, run_delay()) {
        stats.on_cpu_ns = Some(cpu1.saturating_sub(cpu0));
        stats.run_delay_ns = Some((both1 - cpu1).saturating_sub(both0 - cpu0));
    }
    stats.voluntary_switches = first_switches
        .zip(voluntary_switches())
        .map(|(a, b)| b.saturating_sub(a));
    counts.sender = Some(*stats);
    counts
}

/// The open model on the clock's own timers (the virtual clock; the real
/// one when no thread can be started).
async fn run_open_on_timers(ctx: Ctx) -> ModelCounts {
    let plan = ctx.plan;
    let end = ctx.end_ns();
    let permits = Arc::new(Semaphore::new(plan.max_in_flight));
    let in_flight = InFlight::new();
    let mut schedule = Schedule::new(plan.rate_per_s, plan.arrivals, plan.seed);
    let mut counts = ModelCounts::default();
    let mut behind_streak = 0u32;
    while let Some(intended) = schedule.next() {
        if intended >= end {
            break;
        }
        let measured = ctx.measured(intended);
        counts.scheduled += u64::from(measured);
        if ctx.now() < intended {
            ctx.sleep_until(intended).await;
            behind_streak = 0;
        } else {
            // Behind schedule: send at once, but let completions run now and
            // then so a generator that cannot keep up still ends on time.
            behind_streak += 1;
            if behind_streak.is_multiple_of(64) {
                tokio::task::yield_now().await;
            }
        }
        // Bounded in-flight: when the bound is hit the request waits here,
        // its latency still counting from `intended`.
        let permit = match permits.clone().try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) => tokio::select! {
                biased;
                p = permits.clone().acquire_owned() => p.ok(),
                _ = ctx.clock.sleep_until(ctx.t0_ns + ctx.cutoff_ns()) => None,
            },
        };
        let sent = ctx.now();
        let Some(permit) = permit.filter(|_| sent < ctx.cutoff_ns()) else {
            let left = ctx.count_measured_left(&mut schedule);
            counts.not_sent += u64::from(measured) + left;
            counts.scheduled += left;
            break;
        };
        if plan
            .latency_limit_ns
            .is_some_and(|l| sent.saturating_sub(intended) > l)
        {
            counts.skipped += u64::from(measured);
            continue;
        }
        lock(&ctx.rec).on_send(intended, sent);
        let fut = ctx.target.call();
        in_flight.start();
        let (task_ctx, task_in_flight) = (ctx.clone(), in_flight.clone());
        ctx.clock.spawn(async move {
            let result = task_ctx.with_timeout(fut, sent).await;
            let done = task_ctx.now();
            lock(&task_ctx.rec).on_complete(intended, sent, done, &result);
            drop(permit);
            task_in_flight.done();
        });
    }
    in_flight.drain(&ctx, ctx.cutoff_ns()).await;
    ctx.finish(&mut counts);
    counts
}

/// The closed model (Sec. 2, Listing 1) with `plan.connections` connections.
/// Ends at warm-up + duration + grace at the latest.
pub(crate) async fn run_closed(ctx: Ctx) -> ModelCounts {
    let plan = ctx.plan;
    let n = plan.connections.max(1) as u64;
    let running = InFlight::new();
    for j in 0..n {
        running.start();
        let (ctx, running) = (ctx.clone(), running.clone());
        let schedule = Schedule::strided(plan.rate_per_s, plan.arrivals, plan.seed, j, n);
        ctx.clock.clone().spawn(async move {
            connection(&ctx, schedule).await;
            running.done();
        });
    }
    running.drain(&ctx, ctx.cutoff_ns()).await;
    // What the schedule asked for, counted from the schedule itself so that
    // connections still stuck in a call cannot race the count.
    let mut all = Schedule::new(plan.rate_per_s, plan.arrivals, plan.seed);
    let mut counts = ModelCounts {
        scheduled: ctx.count_measured_left(&mut all),
        ..Default::default()
    };
    counts.omitted = counts.scheduled.saturating_sub(lock(&ctx.rec).sent);
    ctx.finish(&mut counts);
    counts
}

/// One YCSB client thread (Listing 1). Requests it never sends are the
/// phase's `omitted` count.
async fn connection(ctx: &Ctx, schedule: Schedule) {
    let end = ctx.end_ns();
    for deadline in schedule {
        if deadline >= end {
            return;
        }
        // Lines 11–16: sleep until this operation's deadline (no sleep when
        // behind: the backlog is sent back to back).
        ctx.sleep_until(deadline).await;
        // Line 4: startTime.
        let start = ctx.now();
        if start >= ctx.cutoff_ns() {
            return;
        }
        lock(&ctx.rec).on_send(deadline, start);
        // Line 5: the synchronous call; the run's end stops waiting for it.
        let result = tokio::select! {
            biased;
            r = ctx.with_timeout(ctx.target.call(), start) => r,
            _ = ctx.clock.sleep_until(ctx.t0_ns + ctx.cutoff_ns()) => return,
        };
        // Line 6: endTime. Lines 7–8 measure endTime − startTime; the
        // correction of Sec. 2.1 measures endTime − deadline.
        let done = ctx.now();
        lock(&ctx.rec).on_complete(deadline, start, done, &result);
    }
}
