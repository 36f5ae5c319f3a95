//! The two clocks a phase can run on.
//!
//! * Real: tokio's runtime and timers (1 ms timer granularity; every send's
//!   lag behind its intended time is measured and reported).
//! * Virtual: a single-threaded discrete-event executor. Time stands still
//!   while any task can make progress and jumps to the earliest pending timer
//!   when none can, so an in-process target (the SickStore simulator) gives
//!   exact, deterministic latencies in nanoseconds and a 90 s run takes a
//!   fraction of a second. Targets that wait on the outside world (processes,
//!   sockets) cannot run on it.
//!
//! Driver code is written once against [`Clock`]: `now_ns`, `sleep_until`,
//! `spawn`. Times are nanoseconds since the clock was created.
use std::{
    cmp::Reverse,
    collections::{BinaryHeap, HashMap, VecDeque},
    future::Future,
    pin::Pin,
    sync::{
        Arc, Mutex, MutexGuard, Weak,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    task::{Context, Poll, Wake, Waker},
    time::Duration,
};

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Which clock a phase runs on.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum ClockKind {
    /// Simulated time: exact and deterministic, for in-process targets only.
    Virtual,
    /// The wall clock (tokio's monotonic clock).
    Real,
}

/// Failures of the virtual executor.
#[derive(Debug, thiserror::Error)]
pub enum ClockError {
    #[error(
        "the virtual clock stalled at {at_ns} ns: tasks wait on something other than a timer \
         (a target that needs the real clock was run with --clock virtual)"
    )]
    Stalled { at_ns: u64 },
}

/// A handle on the clock of one phase; cheap to clone into tasks.
#[derive(Clone)]
pub enum Clock {
    Real {
        origin: tokio::time::Instant,
        handle: tokio::runtime::Handle,
    },
    Virtual(Arc<VirtualRuntime>),
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Clock::Real { .. } => "Clock::Real",
            Clock::Virtual(_) => "Clock::Virtual",
        })
    }
}

impl Clock {
    pub fn kind(&self) -> ClockKind {
        match self {
            Clock::Real { .. } => ClockKind::Real,
            Clock::Virtual(_) => ClockKind::Virtual,
        }
    }

    /// Nanoseconds since this clock was created.
    pub(crate) fn now_ns(&self) -> u64 {
        match self {
            Clock::Real { origin, .. } => {
                u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
            }
            Clock::Virtual(rt) => rt.now_ns(),
        }
    }

    /// A future that completes once `now_ns() >= deadline_ns`.
    pub(crate) fn sleep_until(&self, deadline_ns: u64) -> Sleep {
        match self {
            Clock::Real { origin, .. } => Sleep::Real(Box::pin(tokio::time::sleep_until(
                *origin + Duration::from_nanos(deadline_ns),
            ))),
            Clock::Virtual(rt) => Sleep::Virtual {
                rt: rt.clone(),
                deadline_ns,
                registered: None,
            },
        }
    }

    /// Runs `fut` concurrently with the caller.
    pub fn spawn(&self, fut: impl Future<Output = ()> + Send + 'static) {
        match self {
            Clock::Real { handle, .. } => {
                handle.spawn(fut);
            }
            Clock::Virtual(rt) => rt.spawn(Box::pin(fut)),
        }
    }
}

/// See [`Clock::sleep_until`].
pub(crate) enum Sleep {
    Real(Pin<Box<tokio::time::Sleep>>),
    Virtual {
        rt: Arc<VirtualRuntime>,
        deadline_ns: u64,
        /// The waker last handed to the timer heap, so that re-polls by the
        /// same task do not pile up duplicate timers.
        registered: Option<Waker>,
    },
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.get_mut() {
            Sleep::Real(s) => s.as_mut().poll(cx),
            Sleep::Virtual {
                rt,
                deadline_ns,
                registered,
            } => {
                if rt.now_ns() >= *deadline_ns {
                    return Poll::Ready(());
                }
                if !registered.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    rt.add_timer(*deadline_ns, cx.waker().clone());
                    *registered = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A task that panicked has already failed the run; the data it guarded is
    // plain bookkeeping that stays consistent, so poisoning is not fatal here.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct Timer {
    deadline_ns: u64,
    seq: u64,
    waker: Waker,
}

impl PartialEq for Timer {
    fn eq(&self, other: &Self) -> bool {
        (self.deadline_ns, self.seq) == (other.deadline_ns, other.seq)
    }
}
impl Eq for Timer {}
impl PartialOrd for Timer {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Timer {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.deadline_ns, self.seq).cmp(&(other.deadline_ns, other.seq))
    }
}

struct Task {
    id: u64,
    rt: Weak<VirtualRuntime>,
    future: Mutex<Option<BoxFuture>>,
    queued: AtomicBool,
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel)
            && let Some(rt) = self.rt.upgrade()
        {
            lock(&rt.ready).push_back(self);
        }
    }
}

/// The virtual-time executor: FIFO run queue, timers ordered by (deadline,
/// registration order), so a run is a deterministic function of its inputs.
pub struct VirtualRuntime {
    now_ns: AtomicU64,
    next_seq: AtomicU64,
    timers: Mutex<BinaryHeap<Reverse<Timer>>>,
    ready: Mutex<VecDeque<Arc<Task>>>,
    tasks: Mutex<HashMap<u64, Arc<Task>>>,
    me: Weak<VirtualRuntime>,
}

impl VirtualRuntime {
    pub fn new() -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            now_ns: AtomicU64::new(0),
            next_seq: AtomicU64::new(0),
            timers: Mutex::new(BinaryHeap::new()),
            ready: Mutex::new(VecDeque::new()),
            tasks: Mutex::new(HashMap::new()),
            me: me.clone(),
        })
    }

    pub fn clock(self: &Arc<Self>) -> Clock {
        Clock::Virtual(self.clone())
    }

    pub(crate) fn now_ns(&self) -> u64 {
        self.now_ns.load(Ordering::Acquire)
    }

    fn add_timer(&self, deadline_ns: u64, waker: Waker) {
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        lock(&self.timers).push(Reverse(Timer {
            deadline_ns,
            seq,
            waker,
        }));
    }

    fn spawn(&self, future: BoxFuture) {
        let id = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let task = Arc::new(Task {
            id,
            rt: self.me.clone(),
            future: Mutex::new(Some(future)),
            queued: AtomicBool::new(true),
        });
        lock(&self.tasks).insert(id, task.clone());
        lock(&self.ready).push_back(task);
    }

    fn poll_task(&self, task: Arc<Task>) {
        task.queued.store(false, Ordering::Release);
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        let mut slot = lock(&task.future);
        let done = match slot.as_mut() {
            Some(f) => f.as_mut().poll(&mut cx).is_ready(),
            None => false,
        };
        if done {
            let finished = slot.take();
            drop(slot);
            lock(&self.tasks).remove(&task.id);
            drop(finished);
        }
    }

    /// Runs `fut` to completion on virtual time, with every task it spawns.
    /// Tasks still pending when `fut` completes are dropped.
    pub(crate) fn block_on<F>(self: &Arc<Self>, fut: F) -> Result<F::Output, ClockError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let out: Arc<Mutex<Option<F::Output>>> = Arc::new(Mutex::new(None));
        let out_in = out.clone();
        self.spawn(Box::pin(async move {
            let v = fut.await;
            *lock(&out_in) = Some(v);
        }));
        let result = loop {
            loop {
                let next = lock(&self.ready).pop_front();
                match next {
                    Some(task) => self.poll_task(task),
                    None => break,
                }
            }
            if let Some(v) = lock(&out).take() {
                break Ok(v);
            }
            // Nothing can run: jump to the earliest timer and fire every timer
            // due then.
            let mut fired = Vec::new();
            {
                let mut timers = lock(&self.timers);
                let Some(Reverse(first)) = timers.pop() else {
                    break Err(ClockError::Stalled {
                        at_ns: self.now_ns(),
                    });
                };
                let t = first.deadline_ns.max(self.now_ns());
                self.now_ns.store(t, Ordering::Release);
                fired.push(first.waker);
                while timers.peek().is_some_and(|Reverse(n)| n.deadline_ns <= t) {
                    if let Some(Reverse(n)) = timers.pop() {
                        fired.push(n.waker);
                    }
                }
            }
            fired.into_iter().for_each(Waker::wake);
        };
        self.shutdown();
        result
    }

    /// Drops every remaining task. Futures are dropped outside the locks
    /// because dropping one may wake another.
    fn shutdown(&self) {
        let timers = std::mem::take(&mut *lock(&self.timers));
        drop(timers);
        let ready = std::mem::take(&mut *lock(&self.ready));
        drop(ready);
        let tasks: Vec<Arc<Task>> = lock(&self.tasks).drain().map(|(_, t)| t).collect();
        let futures: Vec<BoxFuture> = tasks
            .iter()
            .filter_map(|t| lock(&t.future).take())
            .collect();
        drop(futures);
        lock(&self.ready).clear();
        lock(&self.timers).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a virtual clock that advances while work is runnable, or that
    /// fires timers out of order: two sleepers must wake at exactly their
    /// deadlines, in deadline order.
    #[test]
    fn virtual_sleeps_wake_at_exact_deadlines_in_order() {
        let rt = VirtualRuntime::new();
        let clock = rt.clock();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (c, l) = (clock.clone(), log.clone());
        let out = rt
            .block_on(async move {
                for d in [30_000_123u64, 10_000_007] {
                    let (c2, l2) = (c.clone(), l.clone());
                    c.spawn(async move {
                        c2.sleep_until(d).await;
                        lock(&l2).push((d, c2.now_ns()));
                    });
                }
                c.sleep_until(50_000_000).await;
                c.now_ns()
            })
            .unwrap();
        assert_eq!(out, 50_000_000);
        assert_eq!(
            *lock(&log),
            vec![(10_000_007, 10_000_007), (30_000_123, 30_000_123)]
        );
    }

    /// Catches an executor that hangs instead of reporting a task waiting on
    /// something that no timer will ever complete.
    #[test]
    fn virtual_runtime_reports_a_stall() {
        let rt = VirtualRuntime::new();
        let err = rt
            .block_on(async { std::future::pending::<()>().await })
            .unwrap_err();
        assert!(matches!(err, ClockError::Stalled { at_ns: 0 }));
    }

    /// Catches tasks that outlive the run (leaking their state): a task still
    /// sleeping when the main future ends must be dropped.
    #[test]
    fn pending_tasks_are_dropped_at_the_end() {
        struct Flag(Arc<AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicBool::new(false));
        let rt = VirtualRuntime::new();
        let c = rt.clock();
        let d = dropped.clone();
        rt.block_on(async move {
            let c2 = c.clone();
            c.spawn(async move {
                let _flag = Flag(d);
                c2.sleep_until(u64::MAX).await;
            });
            c.sleep_until(1).await;
        })
        .unwrap();
        assert!(dropped.load(Ordering::SeqCst));
    }
}
