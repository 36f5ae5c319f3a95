//! Tests of the cross-check's comparisons (crosscheck.rs).
use super::*;

/// Catches tolerance arithmetic that passes everything or nothing: 1 %
/// of 300 ms is 3 ms, so 303 ms agrees and 310 ms does not; the 2 ms
/// floor applies to small values.
#[test]
fn tolerances_are_the_larger_of_relative_and_absolute() {
    let a = Agreement::new("on_cpu_ns", 303 * MS, "ref", 300 * MS, 0.01, 2 * MS);
    assert!(a.within && !a.flagged());
    let b = Agreement::new("on_cpu_ns", 310 * MS, "ref", 300 * MS, 0.01, 2 * MS);
    assert!(!b.within && b.flagged());
    let c = Agreement::new("on_cpu_ns", 11 * MS, "ref", 10 * MS, 0.01, 2 * MS);
    assert!(c.within);
    assert!((b.rel_diff - 10.0 / 300.0).abs() < 1e-9);
}

/// Recorded from `attach --pid POSTMASTER --children --duration 5s`
/// beside `pgbench -c 6` and two CPU burners: a backend's ledger on-CPU
/// 246 914 429 ns; schedstat read after the images grew by 253 055 781
/// ns (−2.4 %: flagged when compared as read); the runtime grew by
/// 7 689 923 ns between the reads around the last image and by
/// 88 075 around the first. Catches a comparison of different instants
/// (the backend is flagged), a range that swallows a wrong figure (5 %
/// over the top or 2 % under the bottom is flagged) and a bracket that
/// changes a comparison read at one instant.
#[test]
fn a_reference_read_after_the_images_is_compared_with_its_range() {
    let (ledger, kernel) = (246_914_429, 253_055_781);
    let as_read = Agreement::new("on_cpu_ns", ledger, "ref", kernel, 0.01, 2 * MS);
    assert!(as_read.flagged());
    let b = Bracket {
        start: super::super::bracket::Slack {
            run_ns: 88_075,
            wait_ns: 0,
            switches: 0,
            read_bytes: 0,
        },
        end: super::super::bracket::Slack {
            run_ns: 7_689_923,
            wait_ns: 0,
            switches: 0,
            read_bytes: 0,
        },
        ..Default::default()
    };
    let rows = process(
        &LedgerMeasures {
            on_cpu_ns: ledger,
            ..Default::default()
        },
        Some(&ProcCounters {
            schedstat_run_ns: Some(kernel),
            ..Default::default()
        }),
        None,
        1,
        10 * MS,
        true,
        0.0,
    );
    let rows = at_the_ledgers_reads(rows, &b);
    let r = &rows[0];
    assert_eq!(r.reference, "schedstat sum_exec_runtime");
    assert_eq!(
        (r.kernel_low, r.kernel_high),
        (Some(245_365_858), Some(253_143_856))
    );
    assert!(r.within && !r.flagged());
    let high = Agreement::new(
        "on_cpu_ns",
        253_143_856 * 105 / 100,
        "ref",
        kernel,
        0.01,
        2 * MS,
    )
    .bracketed(88_075, 7_689_923);
    assert!(high.flagged(), "{high:?}");
    let low = Agreement::new(
        "on_cpu_ns",
        245_365_858 * 98 / 100,
        "ref",
        kernel,
        0.01,
        2 * MS,
    )
    .bracketed(88_075, 7_689_923);
    assert!(low.flagged(), "{low:?}");
    let same = Agreement::new("on_cpu_ns", ledger, "ref", kernel, 0.01, 2 * MS).bracketed(0, 0);
    assert_eq!(same, as_read);
    // Read right around the images, schedstat takes that range instead
    // (here 1.5 ms wide); the other references keep the slack.
    let tight = Bracket {
        runtime: Some((246_100_000, 247_600_000)),
        ..b
    };
    let rows = at_the_ledgers_reads(
        vec![
            Agreement::new(
                "on_cpu_ns",
                ledger,
                "schedstat sum_exec_runtime",
                kernel,
                0.01,
                2 * MS,
            ),
            Agreement::new(
                "on_cpu_ns",
                ledger,
                "taskstats cpu_run_virtual_total",
                kernel,
                0.01,
                2 * MS,
            ),
            Agreement::new(
                "on_cpu_ns",
                252_000_000,
                "schedstat sum_exec_runtime",
                kernel,
                0.01,
                2 * MS,
            ),
        ],
        &tight,
    );
    assert_eq!(
        (rows[0].kernel_low, rows[0].kernel_high),
        (Some(246_100_000), Some(247_600_000))
    );
    assert!(rows[0].within);
    assert_eq!(rows[1].kernel_low, Some(245_365_858));
    // 4.4 ms above the range, tolerance 2.5 ms: flagged, though within
    // the slack of the later references.
    assert!(rows[2].flagged(), "{:?}", rows[2]);
}

/// Catches a cross-check that flags what cannot agree by construction:
/// buffered write bytes differ and are informational, never flagged.
#[test]
fn buffered_writes_are_informational() {
    let k = LedgerMeasures::default();
    let p = ProcCounters {
        write_bytes: Some(1 << 20),
        ..Default::default()
    };
    let rows = process(&k, Some(&p), None, 1, 10 * MS, true, 0.0);
    let w = rows.iter().find(|r| r.measure == "io.write_bytes").unwrap();
    assert!(!w.within && !w.flagged() && w.informational.is_some());
}

/// The postmaster of a PostgreSQL server under pgbench read nothing
/// itself while /proc/PID/io grew by the 634 880 bytes of children it
/// reaped. Catches that comparison flagged (a healthy server, a shell,
/// make), and a per-thread reference that hides a real fault: the
/// ledger short of the threads' own bytes, or above the whole
/// process's, is still flagged.
#[test]
fn reaped_childrens_io_is_not_the_processs_own() {
    let rows = |ledger: u64, whole: u64, threads: u64| {
        let k = LedgerMeasures {
            io: ttp_ledger::accounts::IoMeasures {
                read_bytes: ledger,
                ..Default::default()
            },
            ..Default::default()
        };
        let p = ProcCounters {
            read_bytes: Some(whole),
            threads_read_bytes: Some(threads),
            ..Default::default()
        };
        process(&k, Some(&p), None, 1, 10 * MS, true, 0.0)
    };
    let find = |r: &[Agreement], reference: &str| {
        r.iter().find(|a| a.reference == reference).unwrap().clone()
    };
    let healthy = rows(0, 634_880, 0);
    assert!(healthy.iter().all(|a| !a.flagged()), "{healthy:?}");
    assert!(find(&healthy, "/proc/PID/task/*/io read_bytes").within);
    let whole = find(&healthy, "/proc/PID/io read_bytes");
    assert_eq!(whole.informational, Some(REAPED_IO));
    // No child reaped: the whole-process file is a plain comparison.
    let plain = rows(1 << 20, 1 << 20, 1 << 20);
    assert!(
        plain
            .iter()
            .all(|a| a.informational.is_none() || a.measure != "io.read_bytes")
    );
    assert!(plain.iter().all(|a| !a.flagged()));
    // The ledger missed the process's own reads: flagged by its threads.
    let short = rows(0, 1 << 20, 1 << 20);
    assert!(find(&short, "/proc/PID/task/*/io read_bytes").flagged());
    // The ledger above everything the kernel counted: flagged by both.
    let over = rows(2 << 20, 1 << 20, 1 << 20);
    assert!(find(&over, "/proc/PID/task/*/io read_bytes").flagged());
    assert!(find(&over, "/proc/PID/io read_bytes").flagged());
    // Threads that exited (the live ones read nothing): a ledger above
    // the whole process is still a fault.
    let over_exited = rows(3 << 20, 1 << 20, 0);
    assert!(find(&over_exited, "/proc/PID/io read_bytes").flagged());
}

/// The pgbench backend of `attach --children`: the ledger's 663 552
/// read bytes against 671 744 in its /proc files read after the image
/// (−1.2 %, two pages; tolerance 4 KiB), while its threads' own
/// /proc/TID/io grew by 8 192 bytes between the reads around the last
/// image and after the references. Catches read bytes compared as read
/// at another instant (flagged), and a bracket that swallows a larger
/// shortfall.
#[test]
fn read_bytes_are_compared_at_the_ledgers_reads() {
    let rows = |ledger: u64| {
        let k = LedgerMeasures {
            io: ttp_ledger::accounts::IoMeasures {
                read_bytes: ledger,
                ..Default::default()
            },
            ..Default::default()
        };
        let p = ProcCounters {
            read_bytes: Some(671_744),
            threads_read_bytes: Some(671_744),
            ..Default::default()
        };
        process(&k, Some(&p), None, 1, 10 * MS, true, 0.0)
    };
    let b = Bracket {
        end: super::super::bracket::Slack {
            read_bytes: 8_192,
            ..Default::default()
        },
        ..Default::default()
    };
    let as_read = rows(663_552);
    assert!(as_read.iter().any(Agreement::flagged));
    let bracketed = at_the_ledgers_reads(as_read, &b);
    assert!(bracketed.iter().all(|a| !a.flagged()), "{bracketed:?}");
    let short = at_the_ledgers_reads(rows(663_552 - 8_192), &b);
    assert!(short.iter().any(Agreement::flagged));
}

/// Two `cc` of a shell's build under `attach --children`: the ledger's
/// 0.2 ms of I/O wait against an exit record's blkio delay of 3 488 s,
/// the machine's uptime, in a 6 s window. Catches that reference
/// flagged as the ledger's fault, and a figure a window can hold (or a
/// ledger short of it) losing its flag.
#[test]
fn an_uptime_sized_delay_is_the_references_fault() {
    let row = |kernel: u64| {
        Agreement::new(
            "iowait_ns",
            208_420,
            "taskstats blkio_delay_total",
            kernel,
            0.05,
            2 * MS,
        )
    };
    let rows = impossible_delays(vec![row(3_487_950_166_808), row(500 * MS)], 6_000 * MS, 1);
    assert_eq!(rows[0].informational, Some(IMPOSSIBLE_DELAY));
    assert!(!rows[0].flagged());
    assert!(rows[1].flagged(), "{:?}", rows[1]);
}

/// A `dd` of 16 MiB O_DIRECT reads beside two CPU burners: the ledger's
/// iowait 14.7 ms against taskstats' blkio delay 9.1 ms, its run-queue
/// wait 6 ms. Catches the run-queue wait after each I/O's wake-up (in the
/// ledger's iowait without the wake-up hook, not in delay accounting's)
/// flagged as a fault, and a surplus beyond that wait left unflagged.
#[test]
fn iowait_may_exceed_the_blkio_delay_by_the_run_queue_wait() {
    let row = |iowait: u64, runq: u64| {
        let k = LedgerMeasures {
            iowait_ns: iowait,
            runq_wait_ns: runq,
            ..Default::default()
        };
        let t = TaskstatsCounters {
            blkio_delay_total_ns: Some(9_077_542),
            ..Default::default()
        };
        process(&k, None, Some(&t), 1, 10 * MS, true, 0.0)
            .into_iter()
            .find(|a| a.reference == "taskstats blkio_delay_total")
            .unwrap()
    };
    assert!(!row(14_695_553, 6 * MS).flagged());
    assert!(row(14_695_553, MS).flagged());
    // Short of the kernel's delay: the run-queue wait does not excuse it.
    assert!(row(5 * MS, 6 * MS).flagged());
}

/// `attach --all` on a VM whose pid 1 never fires the switch tracepoint
/// on its switches out: the ledger's 0 switches against /proc's 18, with
/// 26 switches repaired machine-wide in the window. Catches that shortfall
/// flagged as the ledger's fault, a shortfall beyond the repaired count
/// losing its flag, and a ledger above the kernel excused.
#[test]
fn switches_the_tracepoint_missed_are_not_the_ledgers_fault() {
    let row = |ledger: u64, kernel: u64| {
        Agreement::new(
            "switches",
            ledger,
            "/proc status ctxt_switches",
            kernel,
            0.02,
            4,
        )
    };
    let rows = missed_switches(vec![row(0, 18), row(0, 40), row(60, 18), row(18, 18)], 26);
    assert_eq!(rows[0].informational, Some(MISSED_SWITCHES));
    assert!(!rows[0].flagged());
    assert!(rows[1].flagged(), "{:?}", rows[1]);
    assert!(rows[2].flagged(), "{:?}", rows[2]);
    assert!(rows[3].within && rows[3].informational.is_none());
    // Without repairs in the window the shortfall is a fault.
    assert!(missed_switches(vec![row(0, 18)], 0)[0].flagged());
}
