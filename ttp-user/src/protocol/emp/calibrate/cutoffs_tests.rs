//! Step 8 on the paper's own numbers: the central-cluster statistics of
//! Tables VIII and XII, the L-sample minima of Tables XI and XV, and the
//! periodicities of Table XI, must give the cut-offs of Table XVI.
use std::collections::BTreeMap;

use super::*;
use crate::protocol::emp::calibrate::{
    CalibrationConfig, CentralDaemon, EtFence, InfrequentDaemon, LShape,
};

const MS: u64 = 1_000_000;

/// (daemon, minimum PT in the L-samples in ms, periodicity in hours).
type LRow<'a> = (&'a str, u64, Option<(PeriodKind, u64)>);
const HOUR_NS: u64 = 3_600_000_000_000;

fn central(max_ms: u64, sd_ms: f64) -> CentralDaemon {
    CentralDaemon {
        executions: 10,
        runs: 10,
        max_pt_ns: max_ms * MS,
        mean_pt_ns: 0.0,
        sd_pt_ns: sd_ms * MS as f64,
    }
}

fn analysis(central_tab: &[(&str, u64, f64)], l_tab: &[LRow]) -> CalibrationAnalysis {
    let central_daemons: BTreeMap<String, CentralDaemon> = central_tab
        .iter()
        .map(|&(n, m, s)| (n.to_string(), central(m, s)))
        .collect();
    let infrequent = l_tab
        .iter()
        .map(|&(n, min_ms, p)| {
            let d = InfrequentDaemon {
                name: n.to_string(),
                central: central_daemons.get(n).copied(),
                executions: 2,
                min_pt_ns: min_ms * MS,
                mean_pt_ns: 0.0,
                max_pt_ns: min_ms * MS,
                run_indices: vec![],
                periodicity: p.map(|(kind, hours)| Periodicity {
                    kind,
                    period_runs: 0.0,
                    period_ns: hours * HOUR_NS,
                }),
            };
            (n.to_string(), d)
        })
        .collect();
    CalibrationAnalysis {
        config: CalibrationConfig::default(),
        command: vec![],
        usable_runs: 0,
        skipped_runs: 0,
        median_et_ns: 0,
        mean_et_ns: 0,
        fence: EtFence {
            q1_ns: 0.0,
            q3_ns: 0.0,
            k: 3.0,
            lower_ns: 0.0,
            upper_ns: 0.0,
        },
        runs: vec![],
        pairs: vec![],
        l_shape: LShape {
            pairs: 0,
            central: 0,
            first_high: 0,
            second_high: 0,
            both_high: 0,
            low: 0,
            expected_both_high: 0.0,
            is_l_shape: false,
        },
        symmetry: None,
        central_daemons,
        long_executions: vec![],
        infrequent,
    }
}

fn paper_profile() -> Profile {
    use PeriodKind::{Regular, Tentative};
    // Table VIII (central cluster of dual-INC256), with Table XI's L minima
    // and periodicities. md0_raid1's central maximum is Table VIII's 4 ms
    // (Table XI prints "—", but only 4 ms gives Table XVI's 35 ms).
    let short = analysis(
        &[
            ("cifsd", 1, 0.0),
            ("flush-9:0", 1, 0.0),
            ("java", 6, 0.8),
            ("jbd2/md0-8", 2, 0.2),
            ("kblockd/0", 1, 0.0),
            ("khugepaged", 1, 0.0),
            ("md0_raid1", 4, 0.4),
            ("ntpd", 1, 0.0),
            ("proc_monitor", 204, 1.1),
        ],
        &[
            ("bash", 1, None),
            ("flush-9:0", 126, Some((Tentative, 20))),
            ("grep", 1, None),
            ("jbd2/md0-8", 6, Some((Tentative, 20))),
            ("md0_raid1", 65, Some((Tentative, 20))),
            ("rhn_check", 562, Some((Regular, 4))),
            ("rhnsd", 3, Some((Regular, 4))),
            ("rhsmcertd", 1, None),
            ("rhsmcertd-worke", 114, Some((Regular, 4))),
            ("sshd", 3, None),
        ],
    );
    // Table XII (central cluster of dual-INC32768) and Table XV.
    let long = analysis(
        &[
            ("flush-9:0", 7, 1.5),
            ("grep", 8, 2.1),
            ("java", 3, 0.8),
            ("jbd2/md0-8", 7, 1.4),
            ("kblockd/0", 4, 1.0),
            ("md0_raid1", 26, 4.0),
            ("ntpd", 1, 0.0),
            ("proc_monitor", 206, 1.3),
            ("rhn_check", 714, 93.0),
            ("rhnsd", 9, 1.6),
            ("rhsmcertd", 1, 0.0),
            ("rhsmcertd-worke", 117, 1.0),
            ("sshd", 14, 4.7),
        ],
        &[
            ("flush-9:0", 89, Some((Tentative, 20))),
            ("jbd2/md0-8", 14, Some((Tentative, 20))),
            ("md0_raid1", 76, Some((Tentative, 20))),
            ("rhn_check", 24_942, Some((Regular, 4))),
        ],
    );
    build_profile(short, Some(long), 2.0)
}

/// Cut-off for a program of `program_ns` in ns.
fn cut(p: &Profile, name: &str, program_ns: u64) -> u64 {
    p.daemons
        .iter()
        .find(|d| d.name == name)
        .unwrap()
        .cutoff_for(program_ns)
        .unwrap()
}

/// Table XVI, unambiguous rows (the paper rounds up to whole ms). Catches a
/// midpoint of averages instead of max/min, a missing "max + 2σ" for daemons
/// only in the long run's central cluster, a wrong 5 % task time, or the
/// two cases of a periodic daemon swapped.
#[test]
fn reproduces_table_xvi() {
    let p = paper_profile();
    let short_prog = 128_000 * MS; // INC128
    let long_prog = 16_384_000 * MS; // INC16384
    // (name, program, expected cut-off in ns, Table XVI value in ms)
    let rows: &[(&str, u64, u64, u64)] = &[
        ("bash", short_prog, 500_000, 1),              // (0 + 1)/2
        ("flush-9:0", short_prog, 63_500_000, 64),     // (1 + 126)/2
        ("jbd2/md0-8", short_prog, 4 * MS, 4),         // (2 + 6)/2, < 1 hour
        ("jbd2/md0-8", long_prog, 10_500_000, 11),     // (7 + 14)/2, ≥ 1 hour
        ("md0_raid1", short_prog, 34_500_000, 35),     // (4 + 65)/2
        ("rhn_check", short_prog, 281 * MS, 281),      // (0 + 562)/2, < 12 min
        ("rhn_check", long_prog, 12_828 * MS, 12_828), // (714 + 24,942)/2
        ("rhnsd", short_prog, 1_500_000, 2),           // (0 + 3)/2
        ("rhnsd", long_prog, 12_200_000, 12),          // 9 + 2 × 1.6
        ("rhsmcertd", short_prog, MS, 1),              // max(0.5, 1 + 2 × 0)
        ("rhsmcertd-worke", short_prog, 57 * MS, 57),  // (0 + 114)/2
        ("rhsmcertd-worke", long_prog, 119 * MS, 119), // 117 + 2 × 1
        ("sshd", short_prog, 23_400_000, 23),          // max(1.5, 14 + 2 × 4.7)
    ];
    for &(name, prog, ns, ms) in rows {
        let got = cut(&p, name, prog);
        assert_eq!(got, ns, "{name} for a {prog} ns program");
        // The paper prints whole ms, rounded half up.
        assert_eq!((got + MS / 2) / MS, ms, "{name} rounded to ms");
    }
}

/// Catches a task time other than 5 % of the period (4 h → 12 min, 20 h →
/// 1 h, Table XVI's "Task Time" column) and a boundary on the wrong side.
#[test]
fn task_time_is_five_percent_of_the_period() {
    let p = paper_profile();
    let rhn = p.daemons.iter().find(|d| d.name == "rhn_check").unwrap();
    assert_eq!(rhn.task_time_ns, Some(12 * 60 * 1_000_000_000));
    let just_below = 12 * 60 * 1_000_000_000 - 1;
    assert_eq!(rhn.cutoff_for(just_below), Some(281 * MS));
    assert_eq!(rhn.cutoff_for(just_below + 1), Some(12_828 * MS));
    let jbd = p.daemons.iter().find(|d| d.name == "jbd2/md0-8").unwrap();
    assert_eq!(jbd.task_time_ns, Some(HOUR_NS));
}

/// Catches frequent daemons (never identified as infrequent) leaking into
/// the profile: java and proc_monitor have no cut-off (Table XVI).
#[test]
fn frequent_daemons_get_no_cutoff() {
    let p = paper_profile();
    let names: Vec<&str> = p.daemons.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "bash",
            "flush-9:0",
            "grep",
            "jbd2/md0-8",
            "md0_raid1",
            "rhn_check",
            "rhnsd",
            "rhsmcertd",
            "rhsmcertd-worke",
            "sshd"
        ]
    );
}
