//! The paragraph's wording on constructed Q@Cs and machines: the facts of
//! `ttp_ttpv2::paragraph` put in the words Sec. 9 asks for.
use super::*;
use ttp_ledger::collect::machine::MachineFacts;
use ttp_sys::sys::setup_check::{CheckItem, CheckReport, Status};
use ttp_ttpv2::model::QcInput;
use ttp_ttpv2::paragraph::ParagraphInput;
use ttp_ttpv2::testutil::{clean_qc, query_proc};

/// The deviations in words, one per entry.
fn deviations(m: Option<&MachineFacts>, qcs: &[QcInput]) -> Vec<String> {
    ttp_ttpv2::paragraph::deviations(m, qcs)
        .iter()
        .map(deviation_text)
        .collect()
}

/// The CPU restrictions in words.
fn cpu_restrictions(m: &MachineFacts) -> Vec<String> {
    ttp_ttpv2::paragraph::cpu_restrictions(m)
        .iter()
        .map(deviation_text)
        .collect()
}

/// The cold-cache procedure's shortfalls in words.
fn cold_cache_shortfalls(qcs: &[QcInput]) -> Vec<String> {
    ttp_ttpv2::paragraph::deviations(
        Some(&MachineFacts {
            cold_cache: Some(true),
            ..MachineFacts::default()
        }),
        qcs,
    )
    .iter()
    .filter(|d| matches!(d, Deviation::ColdCache(_)))
    .map(deviation_text)
    .collect()
}

/// The two paragraphs in words.
fn paragraph(p: &ParagraphInput) -> String {
    text(&Paragraph::of(p))
}

/// Catches rounding to a fixed number of decimals instead of two
/// significant digits (Sec. 9 (8)).
#[test]
fn two_significant_digits() {
    assert_eq!(sig2(7.18), "7.2");
    assert_eq!(sig2(0.253), "0.25");
    assert_eq!(sig2(4.0), "4.0");
    assert_eq!(sig2(25.0), "25");
    assert_eq!(sig2(9.96), "10");
    assert_eq!(sig2(100.0), "100");
    assert_eq!(sig2(0.0), "0");
}

/// `taskset -c 0` on 2 CPUs: 2 online CPUs, pinned to CPU 0; a cgroup
/// quota of half a CPU. Catches a pinned run reported as unrestricted,
/// or an unrestricted one as pinned.
#[test]
fn pinning_and_cgroup_limits_are_stated() {
    use ttp_ledger::collect::machine::CgroupCpuLimit;
    let free = MachineFacts {
        cores: Some(2),
        ..MachineFacts::default()
    };
    assert!(cpu_restrictions(&free).is_empty());
    let pinned = MachineFacts {
        affinity_cpus: Some(vec![0]),
        cgroup_cpu_limit: Some(CgroupCpuLimit {
            cgroup: "/limited".into(),
            quota_us: 50_000,
            period_us: 100_000,
        }),
        ..free
    };
    let d = deviations(Some(&pinned), &[]).join("\n");
    for needle in [
        "2 CPU cores were enabled",
        "eq. 1 halves, and QE9 compares, the IOWait summed over all 2 CPUs, unscaled",
        "pinned to CPU 0 (1 of the 2 online CPUs, by their affinity mask)",
        "cgroup /limited, whose CPU quota limits them to 0.50 CPUs' worth of time (50000 µs per 100000 µs) of the 2 online CPUs",
    ] {
        assert!(d.contains(needle), "missing {needle:?} in:\n{d}");
    }
    assert!(!d.contains("iowait_share_ns"), "no ledger share given: {d}");
    // With the query's ledger share of IOWait measured, the paragraph
    // says Time_calc from it is reported beside eq. 1's.
    let mut qc = clean_qc(3);
    for p in qc.qes.iter_mut().flat_map(|q| &mut q.processes) {
        if p.class == ttp_window::window::record::ProcessClass::Query {
            p.m.ledger.iowait_share_ns = Some(1_000_000);
        }
    }
    let d = deviations(Some(&pinned), &[qc]).join("\n");
    assert!(
        d.contains("(the ledger's iowait_share_ns) in place of the half is reported beside it"),
        "{d}"
    );
}

/// The paragraph states the machine, the counts and the deviations it
/// was given. Catches a dropped sentence or a wrong percentage.
#[test]
fn paragraph_mentions_every_piece() {
    let machine = MachineFacts {
        tool: Some("ttp-ebpf 0.1.0".into()),
        cpu_model: Some("AMD EPYC 7B13".into()),
        cores: Some(2),
        memory_bytes: Some(4 << 30),
        disk: Some("virtio vda".into()),
        os: Some("Debian GNU/Linux 13".into()),
        kernel: Some("6.18.0".into()),
        config_hz: Some(250),
        user_hz: Some(100),
        virtualization: Some("kvm".into()),
        delay_accounting_switched_on: true,
        cold_cache: Some(true),
        deviations: vec!["sshd left running".into()],
        ..MachineFacts::default()
    };
    let mut qcs = vec![clean_qc(10)];
    for qe in &mut qcs[0].qes {
        qe.cold_cache = Some(full_cold_step());
    }
    // The probes' cost of QEs 1–3: 0.2 %, 0.4 % and 0.3 % of a 1 s
    // Time_meas, 95 ns a switch.
    for (qe, switches) in qcs[0].qes.iter_mut().zip([21_053u64, 42_105, 31_579]) {
        use ttp_ledger::probe::cost::{CostSnapshot, ProbeCost, ProgramSnapshot, Sampled};
        // One sampling window inside, at 95 ns a run.
        let at = |at_ns, n: u64, windows: u64| CostSnapshot {
            at_ns,
            programs: vec![(
                "sched_switch".into(),
                ProgramSnapshot {
                    runs: n,
                    counted: true,
                    sampled: Sampled {
                        runs: 100 * windows,
                        run_time_ns: 9_500 * windows,
                        windows,
                        mean_sum: 95.0 * windows as f64,
                        mean_sq_sum: 9_025.0 * windows as f64,
                        runs_scaled: 0.0,
                    },
                    ..ProgramSnapshot::default()
                },
            )],
            windows,
            stats_on_ns: 0,
        };
        qe.probe_cost = Some(ProbeCost::between(
            &at(0, 0, 0),
            &at(1_000_000_000, switches, 1),
        ));
    }
    let text = paragraph(&ParagraphInput {
        machine: Some(&machine),
        qcs: &qcs,
        checks: &[],
        qes_total: 10,
        qes_dropped: 1,
        qcs_dropped: 0,
        exact_reported: true,
    });
    for needle in [
        "TTPv2",
        "AMD EPYC 7B13 (2 cores)",
        "4.0 GiB",
        "Debian GNU/Linux 13 with the 6.18.0 kernel",
        "10 times",
        "cold cache",
        "2 CPU cores",
        "kvm",
        "CONFIG_HZ=250",
        "task_delayacct",
        "sshd left running",
        "10% of the query executions and 0% of the queries-at-cardinality",
        "ledger's probes used a median of 0.30% of Time_meas in CPU time per execution (at most 0.40%; 95 ns per context switch)",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

/// The Sec. 3.1 procedure as `run --cold-cache` records it when all of
/// it was done: 64 MiB read with O_DIRECT, the drop, a 1 MiB re-read
/// that reached the device.
fn full_cold_step() -> ttp_window::window::cold_cache::ColdCacheStep {
    ttp_window::window::cold_cache::ColdCacheStep {
        fill_start_unix_ns: Some(1),
        fill_bytes: 64 << 20,
        fill_skipped: None,
        drop_unix_ns: 2,
        check_file_bytes: 1 << 20,
        check_device_bytes: Some(1 << 20),
    }
}

/// "With a cold cache" only when the whole Sec. 3.1 procedure ran and
/// the drop was shown to work before every QE; otherwise the paragraph
/// says the page cache was dropped and names what was skipped or
/// failed. Catches the claim made for a skipped fill, a drop that did
/// not reach the device, or a file that predates the record.
#[test]
fn cold_cache_claimed_only_for_the_full_procedure() {
    let machine = MachineFacts {
        cold_cache: Some(true),
        ..MachineFacts::default()
    };
    let text = |qcs: &[QcInput]| {
        paragraph(&ParagraphInput {
            machine: Some(&machine),
            qcs,
            checks: &[],
            qes_total: 6,
            qes_dropped: 0,
            qcs_dropped: 0,
            exact_reported: false,
        })
    };
    let mut qc = clean_qc(6);
    for qe in &mut qc.qes {
        qe.cold_cache = Some(full_cold_step());
    }
    let t = text(std::slice::from_ref(&qc));
    assert!(t.contains("with a cold cache"), "{t}");
    assert!(cold_cache_shortfalls(std::slice::from_ref(&qc)).is_empty());
    let step = qc.qes[1].cold_cache.as_mut().unwrap();
    step.fill_skipped = Some("reading /var/tmp/x with O_DIRECT failed: EINVAL".into());
    step.fill_bytes = 0;
    qc.qes[2].cold_cache.as_mut().unwrap().check_device_bytes = Some(4096);
    qc.qes[3].cold_cache = None;
    let t = text(std::slice::from_ref(&qc));
    assert!(!t.contains("with a cold cache"), "{t}");
    for needle in [
        "with the page cache dropped before each QE",
        "fill (Sec. 3.1: 64 MB of unrelated data) was skipped or cut short before 1 QE(s): reading /var/tmp/x with O_DIRECT failed: EINVAL",
        "did not reach the device before 1 QE(s)",
        "not recorded for 1 of 6 QEs",
    ] {
        assert!(t.contains(needle), "missing {needle:?} in:\n{t}");
    }
}

/// The hypervisor as collect/machine.rs words it is named once: "the
/// machine is a virtual machine (kvm)", as is a bare name from an
/// older file. Catches "virtual machine (virtual machine (…))".
#[test]
fn a_virtual_machine_is_named_once() {
    for v in ["virtual machine (kvm)", "kvm"] {
        let m = MachineFacts {
            virtualization: Some(v.into()),
            ..Default::default()
        };
        let d = deviations(Some(&m), &[]);
        assert!(
            d.contains(&"the machine is a virtual machine (kvm), so steal time may occur".into()),
            "{d:?}"
        );
    }
}

fn item(id: &str, status: Status, detail: &str) -> CheckItem {
    CheckItem {
        id: id.into(),
        title: id.to_uppercase(),
        source: "TTPv2 Sec. 8.1".into(),
        status,
        detail: detail.into(),
        remedy: None,
        fix: None,
    }
}

/// A run on a VM whose command forked: the deviations name the steal
/// time measured, every item of the check snapshot that did not pass
/// (and none that did), and the process tree as the query. Catches a
/// statement left out, a passing item listed, or the tree claimed for a
/// run that measured one chosen process.
#[test]
fn steal_check_warnings_and_process_tree_are_stated() {
    let mut qc = clean_qc(6);
    for qe in &mut qc.qes {
        qe.query_is_tree = Some(true);
    }
    qc.qes[2].overall.steal_ticks = Some(3);
    qc.qes[4].processes.push(query_proc(77, 1, 0, 0));
    let m = MachineFacts {
        virtualization: Some("virtual machine (kvm)".into()),
        setup_check: Some(CheckReport {
            schema: "ttp.check/1".into(),
            root: "/".into(),
            sample_ms: 1000,
            items: vec![
                item("turbo", Status::Warn, "turbo state not exposed"),
                item("kernel", Status::Pass, "Linux 6.18"),
                item("btf", Status::Fail, &"x".repeat(200)),
            ],
            fixes: vec![],
            leftovers: vec![],
        }),
        ..MachineFacts::default()
    };
    let d = deviations(Some(&m), std::slice::from_ref(&qc)).join("\n");
    for needle in [
        "steal time was measured during 1 of 6 QEs (3 ticks in all; X5 counts them)",
        "TURBO warned (turbo state not exposed)",
        "BTF failed (xxxxxxxxxx",
        "…)",
        "the query is the measured command's whole process tree, its processes' measures summed (at most 2 processes in one QE)",
    ] {
        assert!(d.contains(needle), "missing {needle:?} in:\n{d}");
    }
    assert!(!d.contains("KERNEL"), "{d}");
    for qe in &mut qc.qes {
        qe.query_is_tree = Some(false);
        qe.overall.steal_ticks = Some(0);
    }
    let d = deviations(Some(&m), std::slice::from_ref(&qc)).join("\n");
    assert!(!d.contains("process tree"), "{d}");
    assert!(
        d.contains("no steal time was measured during the 6 QEs"),
        "{d}"
    );
}
