//! Runs one phase (one model against a freshly connected target) on the
//! chosen clock, with the per-second hooks that sit beside it.
use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use super::{
    LoadError, Model, PhasePlan,
    clock::{Clock, ClockKind, VirtualRuntime},
    histograms::Recorder,
    models::{self, Ctx, ModelCounts},
    targets::TargetFactory,
};

/// Something read once per second of a phase and shown beside the latency
/// timeline — e.g. the kernel ledger (on-CPU, run-queue wait, iowait, I/O) of
/// the server process, so that a latency spike can be seen next to what the
/// server was doing. Samplers are called from the phase's runtime; `sample`
/// must be quick (read counters, not wait on them).
pub trait TimelineSampler: Send {
    /// The key of this sampler's timeline in the phase's JSON `samplers`.
    fn name(&self) -> &'static str;
    /// Called once when the phase starts (its second 0), e.g. to take the
    /// first image the second-1 row is measured from.
    fn start(&mut self) {}
    /// Called at whole second `second` (1, 2, …) after the phase started;
    /// returns the row for the second that just ended.
    fn sample(&mut self, second: u64) -> serde_json::Value;
}

/// Optional companions of a phase.
#[derive(Default)]
pub struct PhaseHooks {
    pub samplers: Vec<Box<dyn TimelineSampler>>,
    /// Advanced to the phase's elapsed milliseconds (length: warm-up +
    /// duration); finished when the phase ends.
    pub progress: Option<indicatif::ProgressBar>,
}

/// Everything one phase produced.
#[derive(Debug, Clone)]
pub struct PhaseResult {
    pub model: Model,
    pub plan: PhasePlan,
    pub clock: ClockKind,
    pub recorder: Recorder,
    pub counts: ModelCounts,
    /// Per sampler name, one row per second.
    pub samples: BTreeMap<String, Vec<serde_json::Value>>,
}

/// Runs `model` against a target connected from `factory` on a new runtime
/// with the given clock. Returns at warm-up + duration + grace at the latest
/// (plus the target's connect time).
pub fn run_phase(
    model: Model,
    plan: PhasePlan,
    clock: ClockKind,
    factory: Arc<dyn TargetFactory>,
    hooks: PhaseHooks,
) -> Result<PhaseResult, LoadError> {
    let result = match clock {
        ClockKind::Virtual => {
            let rt = VirtualRuntime::new();
            let c = rt.clock();
            rt.block_on(phase(model, plan, c, factory, hooks))??
        }
        ClockKind::Real => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(LoadError::Runtime)?;
            let c = Clock::Real {
                origin: tokio::time::Instant::now(),
                handle: rt.handle().clone(),
            };
            let r = rt.block_on(phase(model, plan, c, factory, hooks));
            // Requests still pending (a hung target) are dropped with the
            // runtime; process targets kill their children on drop.
            rt.shutdown_timeout(Duration::from_millis(500));
            r?
        }
    };
    Ok(result)
}

async fn phase(
    model: Model,
    plan: PhasePlan,
    clock: Clock,
    factory: Arc<dyn TargetFactory>,
    hooks: PhaseHooks,
) -> Result<PhaseResult, LoadError> {
    let concurrency = match model {
        Model::Open => plan.max_in_flight,
        Model::Closed => plan.connections,
    };
    let target = factory.connect(&clock, concurrency).await?;
    let t0_ns = clock.now_ns();
    let end_ns = plan.warmup_ns + plan.duration_ns;
    let mut recorder = Recorder::new(plan.warmup_ns, end_ns, plan.grace_ns);
    recorder.latency_limit_ns = plan.latency_limit_ns;
    let rec = Arc::new(Mutex::new(recorder));
    let stop = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(Mutex::new(BTreeMap::<String, Vec<serde_json::Value>>::new()));
    let progress = hooks.progress.clone();
    if !hooks.samplers.is_empty() {
        spawn_sampler_ticker(&clock, t0_ns, hooks.samplers, samples.clone(), stop.clone());
    }
    if let Some(bar) = progress.clone() {
        spawn_progress_ticker(&clock, t0_ns, end_ns, bar, stop.clone());
    }
    let ctx = Ctx {
        clock: clock.clone(),
        target,
        rec: rec.clone(),
        plan,
        t0_ns,
    };
    let counts = match model {
        Model::Open => models::run_open(ctx).await,
        Model::Closed => models::run_closed(ctx).await,
    };
    stop.store(true, Ordering::Release);
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    let recorder = models::lock(&rec).clone();
    let samples = std::mem::take(&mut *samples.lock().unwrap_or_else(|e| e.into_inner()));
    Ok(PhaseResult {
        model,
        plan,
        clock: clock.kind(),
        recorder,
        counts,
        samples,
    })
}

fn spawn_sampler_ticker(
    clock: &Clock,
    t0_ns: u64,
    mut samplers: Vec<Box<dyn TimelineSampler>>,
    out: Arc<Mutex<BTreeMap<String, Vec<serde_json::Value>>>>,
    stop: Arc<AtomicBool>,
) {
    let c = clock.clone();
    for s in &mut samplers {
        s.start();
    }
    clock.spawn(async move {
        let mut second = 1u64;
        loop {
            c.sleep_until(t0_ns + second * 1_000_000_000).await;
            if stop.load(Ordering::Acquire) {
                return;
            }
            let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
            for s in &mut samplers {
                let row = s.sample(second);
                out.entry(s.name().to_string()).or_default().push(row);
            }
            second += 1;
        }
    });
}

fn spawn_progress_ticker(
    clock: &Clock,
    t0_ns: u64,
    end_ns: u64,
    bar: indicatif::ProgressBar,
    stop: Arc<AtomicBool>,
) {
    const TICK_NS: u64 = 200_000_000;
    let c = clock.clone();
    clock.spawn(async move {
        let mut t = TICK_NS;
        while !stop.load(Ordering::Acquire) && t <= end_ns + TICK_NS {
            c.sleep_until(t0_ns + t).await;
            bar.set_position((t.min(end_ns)) / 1_000_000);
            t += TICK_NS;
        }
    });
}
