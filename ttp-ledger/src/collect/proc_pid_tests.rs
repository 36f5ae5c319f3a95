//! Tests on fixture trees copied from a real /proc (tests/fixtures/README.md
//! says what each holds). Expected values were read off the fixture files by
//! hand.
use std::path::{Path, PathBuf};

use super::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name)
}

#[test]
fn comm_with_spaces_and_parentheses() {
    // Catches splitting stat on the first ')' or on whitespace: every later
    // field would shift.
    let img = ProcImage::read_process(&fixture("proc"), 12330).unwrap();
    assert_eq!(img.comm, "((sd-pam) x)");
    assert_eq!(img.state, 'S');
    assert_eq!(img.ppid, 1);
    assert_eq!(img.starttime_ticks, 67785);
    assert_eq!(img.num_threads, Some(1));
    assert_eq!(img.processor, Some(0));
    assert_eq!(img.uid, 0);
    assert_eq!(img.counters.voluntary_switches, Some(1));
    assert_eq!(img.counters.rchar_bytes, Some(6976));
    assert_eq!(img.counters.schedstat_run_ns, Some(908_363));
    assert_eq!(img.counters.schedstat_wait_ns, Some(460_444));
    assert_eq!(img.counters.schedstat_timeslices, Some(1));
}

#[test]
fn process_image_fields() {
    // Catches utime/stime swapped or read from the wrong stat columns.
    let img = ProcImage::read_process(&fixture("proc"), 12331).unwrap();
    assert_eq!(
        (img.scope, img.pid, img.tgid),
        (Scope::Process, 12331, 12331)
    );
    assert_eq!(img.comm, "ttp worker");
    assert_eq!(img.counters.utime_ticks, Some(1));
    assert_eq!(img.counters.stime_ticks, Some(19));
    assert_eq!(img.counters.blkio_ticks, Some(0));
    assert_eq!(img.counters.involuntary_switches, Some(22));
    assert_eq!(img.num_threads, Some(3));
    assert_eq!(img.processor, Some(1));
}

#[test]
fn thread_images_and_scopes() {
    let root = fixture("proc");
    let process = ProcImage::read_process(&root, 12331).unwrap();
    let threads = ProcImage::read_threads(&root, 12331).unwrap();
    let tids: Vec<i32> = threads.iter().map(|t| t.pid).collect();
    assert_eq!(tids, vec![12331, 12333, 12334]);
    assert!(
        threads
            .iter()
            .all(|t| t.scope == Scope::Thread && t.tgid == 12331)
    );
    let sum = Counters::sum(threads.iter().map(|t| &t.counters));
    // /proc/<pid>/io and stat's utime/stime cover the whole process: the sum
    // over its (all live) threads must equal them. Catches reading the
    // process files where the task files were meant, or the reverse.
    assert_eq!(sum.rchar_bytes, process.counters.rchar_bytes);
    assert_eq!(sum.utime_ticks, process.counters.utime_ticks);
    assert_eq!(sum.stime_ticks, process.counters.stime_ticks);
    // status switches and schedstat are the main thread's only.
    assert_eq!(
        threads[0].counters.involuntary_switches,
        process.counters.involuntary_switches
    );
    assert_eq!(sum.involuntary_switches, Some(22 + 28 + 9));
    assert_eq!(
        sum.schedstat_run_ns,
        Some(30_810_185 + 120_026_860 + 60_042_236)
    );
    // The kernel's tick counts are sum_exec_runtime scaled and truncated per
    // field to 10 ms (USER_HZ=100): at most two ticks below it, never above.
    let ticks_ns = (sum.utime_ticks.unwrap() + sum.stime_ticks.unwrap()) * 10_000_000;
    let run_ns = sum.schedstat_run_ns.unwrap();
    assert!(
        ticks_ns <= run_ns && run_ns - ticks_ns < 2 * 10_000_000,
        "{ticks_ns} vs {run_ns}"
    );
}

#[test]
fn read_single_thread() {
    let threads = ProcImage::read_threads(&fixture("proc"), 12331).unwrap();
    let t = threads.iter().find(|t| t.pid == 12333).unwrap();
    assert_eq!((t.pid, t.tgid, t.scope), (12333, 12331, Scope::Thread));
    assert_eq!(t.counters.schedstat_timeslices, Some(29));
    assert_eq!(t.counters.stime_ticks, Some(10));
}

#[test]
fn missing_files_are_absent_not_zero() {
    // proc-noacct lacks io and schedstat (a kernel without
    // CONFIG_TASK_IO_ACCOUNTING and CONFIG_SCHED_INFO). Catches treating a
    // missing file as zero or as a vanished process.
    let img = ProcImage::read_process(&fixture("proc-noacct"), 12330).unwrap();
    assert_eq!(img.counters.read_bytes, None);
    assert_eq!(img.counters.schedstat_run_ns, None);
    assert_eq!(img.counters.utime_ticks, Some(0));
    let threads = ProcImage::read_threads(&fixture("proc-noacct"), 12330).unwrap();
    assert_eq!(threads.len(), 1);
    assert_eq!(threads[0].counters.rchar_bytes, None);
    // A sum over inputs with an absent counter is absent.
    let sum = Counters::sum(threads.iter().map(|t| &t.counters));
    assert_eq!(sum.schedstat_run_ns, None);
    assert_eq!(sum.utime_ticks, Some(0));
}

#[test]
fn unknown_pid_is_gone() {
    // Catches reporting a nonexistent pid as a read failure (exit 1) instead
    // of the user's mistake.
    let err = ProcImage::read_process(&fixture("proc"), 999_999).unwrap_err();
    assert!(
        matches!(err, ProcReadError::Gone { pid: 999_999 }),
        "{err:?}"
    );
}

#[test]
fn listing() {
    assert_eq!(list_pids(&fixture("proc")).unwrap(), vec![12330, 12331]);
    let tids: Vec<i32> = ProcImage::read_threads(&fixture("proc"), 12331)
        .unwrap()
        .iter()
        .map(|t| t.pid)
        .collect();
    assert_eq!(tids, vec![12331, 12333, 12334]);
}

#[test]
fn delta_between_images() {
    let root = fixture("proc");
    let threads = ProcImage::read_threads(&root, 12331).unwrap();
    // Use the main thread image as "before" and a copy with larger counters
    // as "after".
    let before = threads[0].clone();
    let mut after = before.clone();
    after.counters.utime_ticks = Some(5);
    after.counters.schedstat_run_ns = Some(30_810_185 + 1_000);
    let d = before.delta(&after).unwrap();
    assert_eq!(d.counters.utime_ticks, Some(5));
    assert_eq!(d.counters.stime_ticks, Some(0));
    assert_eq!(d.counters.schedstat_run_ns, Some(1_000));
    assert!(d.went_backwards.is_empty());

    // Catches wrapping: a counter that decreased is None and named.
    after.counters.stime_ticks = Some(2);
    let d = before.delta(&after).unwrap();
    assert_eq!(d.counters.stime_ticks, None);
    assert_eq!(d.went_backwards, vec!["stime_ticks"]);

    // Catches merging a reused pid with its predecessor.
    after.starttime_ticks += 1;
    assert!(matches!(
        before.delta(&after),
        Err(ProcReadError::DifferentTask { .. })
    ));
}
