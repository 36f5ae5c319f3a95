//! End-to-end runs of the driver: the paper's SickStore set-up on the
//! virtual clock, and short real-clock runs against processes.
use std::{
    path::PathBuf,
    sync::{Arc, OnceLock},
    time::{Duration, Instant},
};

use super::{
    Model, PhasePlan,
    analytic::expected_open_latencies_ns,
    clock::ClockKind,
    driver::{PhaseHooks, PhaseResult, run_phase},
    histograms::{Stats, quantile_of_sorted},
    schedule::Arrivals,
    simulator::{Hiccup, SimParams, SimulateFactory},
    targets::{ExecFactory, TargetFactory},
};

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

fn paper_params(service_latency_ns: u64) -> SimParams {
    // Sec. 5.1: capacity 1250 ops/s, a 1 s hiccup after 30 s; requests
    // otherwise take < 50 µs (Sec. 2).
    SimParams {
        capacity_per_s: 1250.0,
        hiccup: Some(Hiccup {
            at_ns: 30 * S,
            for_ns: S,
        }),
        service_latency_ns,
    }
}

fn plan(rate_per_s: f64, duration_ns: u64, connections: usize) -> PhasePlan {
    PhasePlan {
        rate_per_s,
        arrivals: Arrivals::Uniform,
        seed: 0,
        warmup_ns: 0,
        duration_ns,
        grace_ns: S,
        timeout_ns: None,
        max_in_flight: 4096,
        connections,
        latency_limit_ns: None,
        realtime_sender: false,
    }
}

fn phase(
    model: Model,
    plan: PhasePlan,
    clock: ClockKind,
    f: Arc<dyn TargetFactory>,
) -> PhaseResult {
    run_phase(model, plan, clock, f, PhaseHooks::default()).unwrap()
}

fn sim_phase(model: Model, plan: PhasePlan, params: SimParams) -> PhaseResult {
    phase(
        model,
        plan,
        ClockKind::Virtual,
        Arc::new(SimulateFactory { params }),
    )
}

/// The paper's set-up: 1000 req/s for 90 s (90 000 operations, Sec. 5.1),
/// run once and shared by the tests below.
fn paper_open() -> &'static PhaseResult {
    static OPEN: OnceLock<PhaseResult> = OnceLock::new();
    OPEN.get_or_init(|| sim_phase(Model::Open, plan(1000.0, 90 * S, 4), paper_params(50_000)))
}

/// Catches a driver that sends late, serialises requests or loses the tail
/// in its histogram: on the paper's set-up every open-model percentile must be
/// within 5 % of the queue model's closed-form latencies (Sec. 4, eq. 1–2).
/// Also checks the virtual clock keeps the 90 s run fast.
#[test]
fn open_model_matches_the_queue_model_on_the_paper_setup() {
    let started = Instant::now();
    let open = paper_open();
    let took = started.elapsed();
    let expected = expected_open_latencies_ns(&paper_params(50_000), &open.plan).unwrap();
    assert_eq!(expected.len(), 90_000);
    assert_eq!((open.recorder.sent, open.recorder.ok), (90_000, 90_000));
    let got = Stats::of(&open.recorder.from_intended);
    for q in [0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
        let want = quantile_of_sorted(&expected, q) as f64;
        let have = if q == 1.0 {
            got.max_ns
        } else {
            got.percentile(q * 100.0)
        } as f64;
        assert!(
            (have - want).abs() <= 0.05 * want,
            "p{}: driver {have} ns, queue model {want} ns",
            q * 100.0
        );
    }
    // The hiccup reaches p99: about 0.82 s (request 900 from the top of the
    // 1 s − 0.2 ms·k ramp).
    assert!(got.percentile(99.0) > 800 * MS, "{got:?}");
    assert!(
        took < Duration::from_secs(5),
        "90 s of virtual time took {took:?}"
    );
}

/// Sec. 3's bounded in-flight requests: with at most 100 in flight, the
/// requests intended during the hiccup queue in the client. Their latency
/// must still count from the intended time — the server stays saturated, so
/// the k-th request completes when it would have unbounded and the queue
/// model's latencies still hold (5 %) — while the service time (from the
/// actual send) of all but the 100 requests sent into the hiccup cannot
/// exceed 100 requests' worth of capacity, 80 ms. Catches latency measured
/// from the send.
#[test]
fn in_flight_bound_queues_requests_without_hiding_their_wait() {
    let params = paper_params(50_000);
    let mut p = plan(1000.0, 45 * S, 1);
    p.max_in_flight = 100;
    let open = sim_phase(Model::Open, p, params);
    let expected = expected_open_latencies_ns(&params, &p).unwrap();
    let got = Stats::of(&open.recorder.from_intended);
    for q in [0.5, 0.9, 0.99, 0.999] {
        let want = quantile_of_sorted(&expected, q) as f64;
        let have = got.percentile(q * 100.0) as f64;
        assert!(
            (have - want).abs() <= 0.05 * want,
            "p{}: {have} vs {want}",
            q * 100.0
        );
    }
    let service = Stats::of(&open.recorder.service);
    assert!(service.percentile(99.0) <= 81 * MS, "{service:?}");
    assert!(got.percentile(99.0) > 10 * service.percentile(99.0));
    assert!(open.recorder.send_lag.max() > 900 * MS);
    assert!(open.recorder.errors.is_empty());
}

/// Figure 4 with 4 YCSB threads. Catches a closed loop that does not wait
/// for each response (it would not under-report) and a correction measured
/// from the wrong start: the uncorrected p99 must be at least 10× below the
/// open model's, and YCSB's intended latency must land between the two and
/// recover the open model's tail (the catch-up burst is served at full
/// capacity in the queue model, so it matches it within 5 %).
#[test]
fn closed_model_under_reports_and_ycsb_correction_lands_between() {
    let open = Stats::of(&paper_open().recorder.from_intended);
    let closed = sim_phase(Model::Closed, plan(1000.0, 90 * S, 4), paper_params(50_000));
    let uncorrected = Stats::of(&closed.recorder.service);
    let intended = Stats::of(&closed.recorder.from_intended);
    let (o, u, i) = (
        open.percentile(99.0),
        uncorrected.percentile(99.0),
        intended.percentile(99.0),
    );
    assert!(u * 10 <= o, "uncorrected p99 {u} ns vs open {o} ns");
    assert!(
        u < i && i as f64 <= o as f64 * 1.05,
        "p99: uncorrected {u}, intended {i}, open {o}"
    );
    assert!(
        i as f64 >= o as f64 * 0.95,
        "intended p99 {i} ns vs open {o} ns"
    );
    // With 4 connections only 4 requests wait out the hiccup; their backlog
    // is sent back to back (YCSB's catch-up), so nothing is omitted but the
    // sends lag their deadlines by up to the hiccup.
    assert_eq!(closed.recorder.sent, 90_000);
    assert!(closed.recorder.send_lag.max() > 900 * MS);
}

/// Sec. 2.1's hypothesis and Fig. 3–4: when the connections' catch-up rate
/// (N / l = 4 / 3.5 ms ≈ 1143/s) is below the server's capacity (1250/s), the
/// client-side queue drains late and YCSB's corrected latencies exceed the
/// open model's, most in the mean; with 16 connections they agree again.
/// Catches a correction that ignores client-side queueing.
#[test]
fn ycsb_correction_over_reports_when_catch_up_is_slow() {
    let params = paper_params(3_500_000);
    let p = plan(1000.0, 45 * S, 4);
    let open = Stats::of(&sim_phase(Model::Open, p, params).recorder.from_intended);
    let few = Stats::of(&sim_phase(Model::Closed, p, params).recorder.from_intended);
    let p16 = PhasePlan {
        connections: 16,
        ..p
    };
    let many = Stats::of(&sim_phase(Model::Closed, p16, params).recorder.from_intended);
    assert!(
        few.mean_ns > 1.3 * open.mean_ns,
        "mean: 4 conn. {} vs open {}",
        few.mean_ns,
        open.mean_ns
    );
    assert!(few.percentile(99.0) > open.percentile(99.0));
    assert!((many.mean_ns - open.mean_ns).abs() <= 0.05 * open.mean_ns);
}

/// A shell command that leaves `began` behind and takes 5 ms, or 1 s
/// while `flag` exists.
fn stall_command(began: &std::path::Path, flag: &std::path::Path) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            ": > '{}'; if [ -e '{}' ]; then sleep 1; else sleep 0.005; fi",
            began.display(),
            flag.display()
        ),
    ]
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ttp-load-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// One 3 s phase at 40 req/s against [`stall_command`], stalled from 1 s
/// to 2 s after its first request began. The stall is timed from the
/// phase's own first request, not from when the test started it: on a
/// loaded machine a phase can begin late, and a stall timed from outside
/// would then miss it. Returns the phase and how long it took.
fn stalled_phase(model: Model, dir: &std::path::Path) -> (PhaseResult, Duration) {
    let name = format!("{model:?}");
    let (began, flag) = (
        dir.join(format!("{name}.began")),
        dir.join(format!("{name}.stall")),
    );
    let factory: Arc<dyn TargetFactory> =
        Arc::new(ExecFactory::new(stall_command(&began, &flag)).unwrap());
    let mut p = plan(40.0, 3 * S, 1);
    p.grace_ns = 1500 * MS;
    let toggler = std::thread::spawn(move || {
        let waited = Instant::now();
        while !began.exists() {
            if waited.elapsed() > Duration::from_secs(60) {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(1000));
        std::fs::write(&flag, b"").unwrap();
        std::thread::sleep(Duration::from_millis(1000));
        std::fs::remove_file(&flag).unwrap();
    });
    let started = Instant::now();
    let result = phase(model, p, ClockKind::Real, factory);
    let took = started.elapsed();
    toggler.join().unwrap();
    (result, took)
}

/// The process check: a command taking 5 ms except during a 1 s
/// window where it takes 1 s, 3 s at 40 req/s, open and closed (1
/// connection) side by side. Catches coordinated omission in the open
/// model (its p99 must show the stall) and shows it in the closed model
/// (its service time p99 does not, although the stalled request is there).
/// Each phase must also end by its duration and grace (4.5 s), with 0.4 s
/// for the driver to wake up after its deadline.
#[test]
fn exec_stall_shows_in_open_p99_but_not_in_closed_service_time() {
    let dir = temp_dir("stall");
    let (d1, d2) = (dir.clone(), dir.clone());
    let open = std::thread::spawn(move || stalled_phase(Model::Open, &d1));
    let closed = std::thread::spawn(move || stalled_phase(Model::Closed, &d2));
    let ((open, open_took), (closed, closed_took)) = (open.join().unwrap(), closed.join().unwrap());
    std::fs::remove_dir_all(&dir).ok();

    let open_latency = Stats::of(&open.recorder.from_intended);
    let closed_service = Stats::of(&closed.recorder.service);
    assert!(open.recorder.errors.is_empty() && closed.recorder.errors.is_empty());
    // About a third of the open model's requests were intended during the
    // stall and took ≥ 1 s.
    assert!(
        open_latency.percentile(99.0) >= 950 * MS,
        "{open_latency:?}"
    );
    assert!(open_latency.percentile(50.0) < 200 * MS, "{open_latency:?}");
    // The closed loop sent one request into the stall; its 1 s is the max
    // but p99 of the service time stays at the 5 ms (+ process start) level.
    assert!(closed_service.max_ns >= 950 * MS, "{closed_service:?}");
    assert!(
        closed_service.percentile(99.0) < 200 * MS,
        "{closed_service:?}"
    );
    for took in [open_took, closed_took] {
        assert!(took < Duration::from_millis(4900), "took {took:?}");
    }
}

/// Catches a run that hides failures or stops early: a target that fails
/// every request (`false`) must have every measured request counted as an
/// `exit_status_1` error, an achieved rate of 0, and end on time.
#[test]
fn failing_target_counts_every_request_as_an_error() {
    let factory: Arc<dyn TargetFactory> = Arc::new(ExecFactory::new(vec!["false".into()]).unwrap());
    let mut p = plan(20.0, S, 1);
    p.grace_ns = 500 * MS;
    let started = Instant::now();
    let open = phase(Model::Open, p, ClockKind::Real, factory);
    let took = started.elapsed();
    assert_eq!(open.counts.scheduled, 20);
    assert_eq!(
        open.recorder.errors.get("exit_status_1"),
        Some(&20),
        "{:?}",
        open.recorder.errors
    );
    assert_eq!(open.recorder.ok, 0);
    assert_eq!(open.achieved_rate_per_s(), 0.0);
    assert!(open.recorder.from_intended.is_empty());
    assert!(took < Duration::from_millis(2500), "took {took:?}");
}

fn live_children_named(name: &str) -> usize {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            // pid (comm) state ppid …
            let Some(close) = stat.rfind(')') else {
                return false;
            };
            let comm = &stat[stat.find('(').unwrap_or(0) + 1..close];
            let mut rest = stat[close + 2..].split(' ');
            let state = rest.next().unwrap_or("");
            let ppid = rest.next().unwrap_or("");
            comm == name && ppid == me && state != "Z"
        })
        .count()
}

/// Catches a driver that waits forever on a hung target, or leaves its
/// processes behind: every request hangs (`sleep 30`), the in-flight bound
/// is 3. Both models must end at duration + grace, count the hung requests
/// as `unfinished`, the open model's queued ones as `not_sent`, and the
/// closed model's unreached ones as omitted.
#[test]
fn hung_target_ends_on_time_and_counts_errors() {
    let factory: Arc<dyn TargetFactory> =
        Arc::new(ExecFactory::new(vec!["sleep".into(), "30".into()]).unwrap());
    let mut p = plan(10.0, S, 1);
    p.grace_ns = 300 * MS;
    p.max_in_flight = 3;
    let started = Instant::now();
    let open = phase(Model::Open, p, ClockKind::Real, factory.clone());
    let closed = phase(Model::Closed, p, ClockKind::Real, factory);
    let took = started.elapsed();
    // Two phases of 1 s + 0.3 s grace, plus runtime shutdown and slack.
    assert!(took < Duration::from_millis(4000), "took {took:?}");
    assert_eq!(open.recorder.errors.get("unfinished"), Some(&3));
    assert_eq!(open.recorder.errors.get("not_sent"), Some(&7));
    assert_eq!(open.counts.scheduled, 10);
    assert_eq!(closed.recorder.errors.get("unfinished"), Some(&1));
    assert_eq!(closed.counts.omitted, 9);
    assert_eq!(
        open.achieved_rate_per_s() + closed.achieved_rate_per_s(),
        0.0
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        live_children_named("sleep"),
        0,
        "hung requests' processes were left running"
    );
}

/// Catches a generator that overruns its duration when it cannot keep up:
/// the simulator on the real clock at 5 million req/s for 0.5 s. The run
/// must end on time, report what it achieved, and count the requests it
/// could not send.
#[test]
fn unsustainable_rate_ends_on_time_and_reports_achieved_rate() {
    let mut p = plan(5e6, 500 * MS, 1);
    p.grace_ns = 200 * MS;
    p.max_in_flight = 1000;
    let params = SimParams {
        capacity_per_s: 1e9,
        hiccup: None,
        service_latency_ns: 0,
    };
    let started = Instant::now();
    let open = phase(
        Model::Open,
        p,
        ClockKind::Real,
        Arc::new(SimulateFactory { params }),
    );
    let took = started.elapsed();
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    assert_eq!(open.counts.scheduled, 2_500_000);
    let not_sent = open.recorder.errors.get("not_sent").copied().unwrap_or(0);
    assert!(not_sent > 0, "{:?}", open.recorder.errors);
    assert_eq!(open.recorder.sent + not_sent, 2_500_000);
    assert!(open.achieved_rate_per_s() < 5e6 && open.achieved_rate_per_s() > 0.0);
}

/// The extension point for per-second timelines (e.g. a kernel ledger):
/// catches a sampler that is not called once per whole second of the phase,
/// or whose rows do not reach the result.
#[test]
fn timeline_samplers_are_called_every_second() {
    use super::driver::TimelineSampler;
    struct Seconds;
    impl TimelineSampler for Seconds {
        fn name(&self) -> &'static str {
            "seconds"
        }
        fn sample(&mut self, second: u64) -> serde_json::Value {
            serde_json::json!(second)
        }
    }
    let hooks = PhaseHooks {
        samplers: vec![Box::new(Seconds)],
        progress: None,
    };
    let f: Arc<dyn TargetFactory> = Arc::new(SimulateFactory {
        params: paper_params(50_000),
    });
    let r = run_phase(
        Model::Open,
        plan(100.0, 3 * S, 1),
        ClockKind::Virtual,
        f,
        hooks,
    )
    .unwrap();
    // The last request is intended at 2.99 s and done 50 µs later, so the
    // phase spans whole seconds 1 and 2.
    assert_eq!(
        r.samples["seconds"],
        vec![serde_json::json!(1), serde_json::json!(2)]
    );
}

/// `--latency-limit` counted as pgbench does. Open model, one request in
/// flight at most, 1000 req/s against the queue model (capacity 1250/s,
/// 50 µs) with a 100 ms hiccup at 1 s: the request intended at 1.000 s is
/// held until ≈ 1.100 s, so the requests intended from 1.001 s are already
/// more than 20 ms late when the permit frees unless intended after
/// ≈ 1.080 s: about 79 skipped (never sent). The held one and the backlog
/// after it complete more than 20 ms after their intended start (late).
/// Without the limit nothing is skipped. Catches skips that are not
/// counted, that are sent anyway, or a limit that is ignored.
#[test]
fn latency_limit_skips_and_counts_late_requests() {
    let params = SimParams {
        capacity_per_s: 1250.0,
        hiccup: Some(Hiccup {
            at_ns: S,
            for_ns: 100 * MS,
        }),
        service_latency_ns: 50_000,
    };
    let mut p = plan(1000.0, 3 * S, 1);
    p.max_in_flight = 1;
    let free = sim_phase(Model::Open, p, params);
    assert_eq!(free.counts.skipped, 0);
    assert_eq!(free.recorder.late, 0, "no limit, nothing counted late");
    p.latency_limit_ns = Some(20 * MS);
    let r = sim_phase(Model::Open, p, params);
    let skipped = r.counts.skipped;
    assert!((75..=80).contains(&skipped), "skipped {skipped}");
    assert_eq!(r.counts.scheduled, 3000);
    assert_eq!(r.recorder.sent + skipped, 3000);
    assert_eq!(r.recorder.ok, r.recorder.sent);
    let late = r.recorder.late;
    // The held request is late, and so is the backlog right behind it.
    assert!((1..=40).contains(&late), "late {late}");
    // Every latency over the limit is a late one.
    let over = r
        .recorder
        .from_intended
        .iter_recorded()
        .filter(|v| v.value_iterated_to() > 20 * MS)
        .map(|v| v.count_at_value())
        .sum::<u64>();
    assert_eq!(over, late);
}
