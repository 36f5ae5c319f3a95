//! The running window against `Window::between` over the same records, on
//! constructed accounts whose answers are known by hand.
use std::collections::HashMap;

use ttp_common::{DiskAccount, ExitRecord, ThreadAccount, state};

use super::*;
use crate::{accounts::Window, probe::Snapshot};

fn thread(tid: u32, tgid: u32, start: u64, on_cpu: u64) -> ThreadAccount {
    let mut a = ThreadAccount::zeroed();
    a.tid = tid;
    a.tgid = tgid;
    a.start_time_ns = start;
    a.state = state::SLEEPING;
    a.on_cpu_ns = on_cpu;
    a.comm[..4].copy_from_slice(b"work");
    a
}

fn image(at: u64, threads: Vec<ThreadAccount>) -> Image {
    let mut threads = threads;
    threads.iter_mut().for_each(|t| t.state_since_ns = at);
    Image::from_snapshot(&Snapshot {
        at_ns: at,
        threads,
        cpus: vec![],
        disk: DiskAccount::default(),
        proc_disk: HashMap::new(),
        stats: KernelStats::default(),
        irq: Vec::new(),
    })
}

/// The rows of `tgid`: key, threads, on-CPU time.
fn rows_of(closed: &ClosedWindow, tgid: u32) -> Vec<(ProcKey, u32, u64)> {
    closed
        .processes
        .iter()
        .filter(|(k, _)| k.tgid == tgid)
        .map(|(k, p)| (*k, p.threads, p.kernel.on_cpu_ns))
        .collect()
}

fn exit(exit_ns: u64, a: ThreadAccount) -> ExitRecord {
    let mut account = a;
    account.state = state::DEAD;
    account.state_since_ns = exit_ns;
    ExitRecord { exit_ns, account }
}

/// Pid 20 is used twice within the window: process A (leader started at
/// 100, one more thread) ends at 1 500, process B (leader started at
/// 1 600, one more thread started at 1 700) is still running at the end.
/// A thread of pid 30 alive in both images, one that exits between the
/// first image's maps and its time, a record read before its thread left
/// the image, and a record after the last image. Catches two instances of
/// a pid merged into one row, a thread put in the wrong instance, a record
/// counted twice (also as the image's account), and any difference from
/// `Window::between` over all records at once on what both can say.
#[test]
fn folds_as_records_arrive_and_tells_reused_pids_apart() {
    let a_lead = thread(20, 20, 100, 10);
    let a_thr = thread(21, 20, 150, 5);
    let old = thread(30, 30, 50, 1_000);
    let early = thread(40, 40, 60, 7);
    let first = image(1_000, vec![a_lead, a_thr, old, early]);
    let mut rw = RunningWindow::new(first.clone(), 100);

    // Step 1 (image at 2 000): A ended; B running; `early` ended at 995
    // (inside the first image: still the window's).
    let b_lead = thread(20, 20, 1_600, 40);
    let b_thr = thread(22, 20, 1_700, 60);
    let mut old2 = old;
    old2.on_cpu_ns = 1_300;
    let img1 = image(2_000, vec![b_lead, b_thr, old2]);
    let mut a_lead_end = a_lead;
    a_lead_end.on_cpu_ns = 30;
    let mut a_thr_end = a_thr;
    a_thr_end.on_cpu_ns = 25;
    let mut early_end = early;
    early_end.on_cpu_ns = 9;
    let mut step1 = vec![
        exit(1_400, a_thr_end),
        exit(1_500, a_lead_end),
        exit(995, early_end),
    ];
    // B's extra thread ends at 2 100, after image 1: pending until image 2.
    let mut b_thr_end = b_thr;
    b_thr_end.on_cpu_ns = 90;
    step1.push(exit(2_100, b_thr_end));
    let all: Vec<ExitRecord> = step1.clone();
    rw.fold(&img1, step1);

    // Step 2 (image at 3 000): B's leader still runs; a record after the
    // image (ignored at the end).
    let mut b_lead2 = b_lead;
    b_lead2.on_cpu_ns = 80;
    let mut old3 = old;
    old3.on_cpu_ns = 1_500;
    let img2 = image(3_000, vec![b_lead2, old3]);
    let late = exit(3_500, thread(50, 50, 2_900, 3));
    let mut all = all;
    all.push(late);
    rw.fold(&img2, vec![late]);
    let closed = rw.close(&img2);

    let rows: HashMap<ProcKey, &ProcessDelta> =
        closed.processes.iter().map(|(k, p)| (*k, p)).collect();
    let a = rows[&ProcKey {
        tgid: 20,
        start_ns: 100,
    }];
    assert_eq!((a.kernel.on_cpu_ns, a.threads, a.exited), (40, 2, true));
    let b = rows[&ProcKey {
        tgid: 20,
        start_ns: 1_600,
    }];
    assert_eq!((b.kernel.on_cpu_ns, b.threads, b.exited), (170, 2, false));
    let o = rows[&ProcKey {
        tgid: 30,
        start_ns: 50,
    }];
    assert_eq!(o.kernel.on_cpu_ns, 500);
    let e = rows[&ProcKey {
        tgid: 40,
        start_ns: 60,
    }];
    assert_eq!((e.kernel.on_cpu_ns, e.exited), (2, true));
    assert_eq!(closed.processes.len(), 4);
    assert_eq!(closed.vanished_threads, 0);

    // Window::between over every record agrees wherever a pid was used
    // once, and sums the two instances of pid 20.
    let w = Window::between(&first, &img2, &all);
    assert_eq!(w.processes[&20].kernel.on_cpu_ns, 40 + 170);
    assert_eq!(w.processes[&30].kernel, o.kernel);
    assert_eq!(w.processes[&40].kernel, e.kernel);
    assert_eq!(w.processes.len(), 3);
    assert_eq!(w.vanished_threads, closed.vanished_threads);
}

/// 10 processes end with `keep_exited` 4: the busiest ended ones keep
/// their rows, the others are folded by command into groups whose sums
/// keep every nanosecond; a live process is never folded. Catches rows
/// that grow without bound, a fold that loses time, and busy processes
/// folded before idle ones.
#[test]
fn ended_processes_beyond_the_limit_fold_into_command_groups() {
    let live = thread(1, 1, 10, 0);
    let first = image(1_000, vec![live]);
    let mut rw = RunningWindow::new(first, 4);
    let mut total = 0;
    for i in 0..10u32 {
        let mut t = thread(
            100 + i,
            100 + i,
            1_100 + u64::from(i),
            u64::from(i + 1) * 10,
        );
        if i % 2 == 1 {
            t.comm[..4].copy_from_slice(b"odd_");
        }
        total += u64::from(i + 1) * 10;
        let img = image(2_000 + u64::from(i), vec![live]);
        rw.fold(&img, vec![exit(1_500 + u64::from(i), t)]);
        assert!(rw.ended_rows <= 4, "rows kept: {}", rw.ended_rows);
    }
    assert!(rw.take_compacted());
    let closed = rw.close(&image(3_000, vec![live]));
    let kept: u64 = closed
        .processes
        .iter()
        .map(|(_, p)| p.kernel.on_cpu_ns)
        .sum();
    let folded: u64 = closed
        .exited_groups
        .iter()
        .map(|g| g.kernel.on_cpu_ns)
        .sum();
    assert_eq!(kept + folded, total);
    assert!(closed.processes.iter().any(|(k, _)| k.tgid == 1));
    // The busiest (pid 109, 100 ns) is kept.
    assert!(closed.processes.iter().any(|(k, _)| k.tgid == 109));
    let procs: u64 = closed.exited_groups.iter().map(|g| g.processes).sum();
    let ended_rows = closed.processes.iter().filter(|(_, p)| p.exited).count() as u64;
    assert_eq!(procs + ended_rows, 10);
    assert!(closed.exited_groups.iter().any(|g| g.comm == "odd_"));
}

/// A fork storm: pid 60's first process ended inside the window; its
/// second started after image 1 read its maps, and a thread of it ended
/// before image 1's time, so image 1 holds no leader of pid 60. That
/// thread's record must wait for image 2 (which has the new leader's exit
/// record) instead of joining the first process. Catches a thread put in
/// an earlier process of its pid, or in a row of its own.
#[test]
fn a_thread_whose_leader_is_not_in_the_image_waits_for_the_next() {
    let first = image(1_000, vec![]);
    let mut rw = RunningWindow::new(first, 100);
    let old_leader = thread(60, 60, 1_100, 10);
    let new_leader = thread(60, 60, 1_800, 20);
    let new_thread = thread(61, 60, 1_850, 7);
    let img1 = image(2_000, vec![]);
    rw.fold(
        &img1,
        vec![exit(1_500, old_leader), exit(1_900, new_thread)],
    );
    let img2 = image(3_000, vec![]);
    rw.fold(&img2, vec![exit(2_500, new_leader)]);
    let closed = rw.close(&img2);
    let rows: Vec<(u64, u32, u64)> = closed
        .processes
        .iter()
        .map(|(k, p)| (k.start_ns, p.threads, p.kernel.on_cpu_ns))
        .collect();
    assert_eq!(rows, vec![(1_100, 1, 10), (1_800, 2, 27)]);
}

/// Pid 70's leader ends (pthread_exit in main) while its thread 71 runs
/// on; meanwhile 6 busier processes end with `keep_exited` 2, so rows are
/// folded into groups (the least busy, pid 70's, first) while 71 is alive. Pid 70's row stays until 71 has ended
/// too, and 71's time joins it: one row (or one folded process) for pid
/// 70 with both threads, never a second row of it. Catches the thread
/// starting a row of its own after its process's row was folded.
#[test]
fn a_thread_that_outlives_its_leader_joins_its_process_row() {
    let first = image(1_000, vec![]);
    let mut rw = RunningWindow::new(first, 2);
    let lead = thread(70, 70, 1_050, 1);
    let mut worker = thread(71, 70, 1_060, 5);
    // Image 1: the leader has ended, the worker runs.
    let img1 = image(2_000, vec![worker]);
    rw.fold(&img1, vec![exit(1_500, lead)]);
    for i in 0..6u32 {
        let t = thread(100 + i, 100 + i, 2_100 + u64::from(i), 5);
        worker.on_cpu_ns += 10;
        let img = image(3_000 + u64::from(i), vec![worker]);
        rw.fold(&img, vec![exit(2_500 + u64::from(i), t)]);
    }
    assert!(rw.take_compacted(), "rows were folded while 71 ran");
    // The worker ends after the last of those images.
    let mut end = worker;
    end.on_cpu_ns = 100;
    rw.fold(&image(4_000, vec![]), vec![exit(3_900, end)]);
    // Enough to fold pid 70's row now that its process has ended.
    for i in 0..6u32 {
        let t = thread(200 + i, 200 + i, 4_100 + u64::from(i), 5);
        rw.fold(
            &image(5_000 + u64::from(i), vec![]),
            vec![exit(4_500 + u64::from(i), t)],
        );
    }
    let closed = rw.close(&image(6_000, vec![]));
    let rows = rows_of(&closed, 70);
    let folded: u64 = closed.exited_groups.iter().map(|g| g.processes).sum();
    let ended_rows = closed.processes.iter().filter(|(_, p)| p.exited).count() as u64;
    assert_eq!(folded + ended_rows, 13, "13 processes, each counted once");
    assert!(
        rows.is_empty()
            || rows
                == [(
                    ProcKey {
                        tgid: 70,
                        start_ns: 1_050
                    },
                    2,
                    101
                )],
        "rows of pid 70: {rows:?}"
    );
    let total: u64 = closed
        .processes
        .iter()
        .map(|(_, p)| p.kernel.on_cpu_ns)
        .sum::<u64>()
        + closed
            .exited_groups
            .iter()
            .map(|g| g.kernel.on_cpu_ns)
            .sum::<u64>();
    assert_eq!(total, 101 + 12 * 5);
    assert_eq!(
        closed.processes.len() as u64,
        ended_rows,
        "no live-looking row left"
    );
}

/// Pid 70 at the close: one row keyed by its leader, with `threads`
/// threads and `on_cpu` ns, never a second row; and each of `processes`
/// counted once (a row, or a process of a group), rows having been folded.
fn assert_one_row_of_70(
    mut rw: RunningWindow,
    last: Image,
    threads: u32,
    on_cpu: u64,
    processes: u64,
) {
    let folded_any = rw.take_compacted();
    let closed = rw.close(&last);
    let key = ProcKey {
        tgid: 70,
        start_ns: 1_050,
    };
    assert_eq!(
        rows_of(&closed, 70),
        [(key, threads, on_cpu)],
        "rows of pid 70"
    );
    let folded: u64 = closed.exited_groups.iter().map(|g| g.processes).sum();
    assert!(
        folded_any && folded > 0,
        "no row was folded: nothing tested"
    );
    assert_eq!(folded + closed.processes.len() as u64, processes);
}

/// Six processes busier than pid 70 end at `exit_ns`: with `keep_exited`
/// 2, pid 70's row (the least busy) is the first to fold once it may.
fn busier(exit_ns: u64) -> Vec<ExitRecord> {
    (0..6u32)
        .map(|i| exit(exit_ns, thread(100 + i, 100 + i, 1_100, 50)))
        .collect()
}

/// As above, but the worker is gone from an image before its record can be
/// read: the probe frees a thread's account just before it sends the
/// record, and an image read in between lacks both; six busier processes
/// end with that image. Pid 70's row must wait for the record, which comes
/// with the next drain, and take the worker's time.
#[test]
fn a_thread_gone_before_its_record_came_keeps_its_process_row() {
    let mut rw = RunningWindow::new(image(1_000, vec![]), 2);
    let lead = thread(70, 70, 1_050, 1);
    let worker = thread(71, 70, 1_060, 5);
    rw.fold(&image(2_000, vec![worker]), vec![exit(1_500, lead)]);
    rw.fold(&image(3_000, vec![]), busier(2_500));
    let mut end = worker;
    end.on_cpu_ns = 100;
    rw.fold(&image(4_000, vec![]), vec![exit(2_900, end)]);
    assert_one_row_of_70(rw, image(5_000, vec![]), 2, 101, 7);
}

/// An image is read slot by slot: a leader that starts thread 71 after the
/// read passed 71's slot and then ends leaves an image with neither the
/// thread nor its record, and its own record in the drain after it, with
/// six busier processes' records. Pid 70's row must stay until the next
/// image shows 71, and take 71's time when it ends.
#[test]
fn a_thread_the_image_read_missed_keeps_its_process_row() {
    let mut rw = RunningWindow::new(image(1_000, vec![]), 2);
    let lead = thread(70, 70, 1_050, 1);
    let worker = thread(71, 70, 1_060, 5);
    let mut records = vec![exit(1_500, lead)];
    records.extend(busier(1_600));
    rw.fold(&image(2_000, vec![]), records);
    rw.fold(&image(3_000, vec![worker]), vec![]);
    let mut end = worker;
    end.on_cpu_ns = 100;
    rw.fold(&image(4_000, vec![]), vec![exit(3_500, end)]);
    assert_one_row_of_70(rw, image(5_000, vec![]), 2, 101, 7);
}

/// As above, with the creator a thread: pid 70's leader has long ended,
/// its thread 71 starts 72 during an image's read (after 72's slot) and
/// ends, so that image has neither and the drain after it has 71's record
/// and six busier processes'. 72's time must join pid 70's row. (71's
/// record, of a process without a leader in the image, is held for the
/// next image, which has 72.)
#[test]
fn a_thread_started_by_an_ending_thread_during_the_read_keeps_its_row() {
    let mut rw = RunningWindow::new(image(1_000, vec![]), 2);
    let lead = thread(70, 70, 1_050, 1);
    let t71 = thread(71, 70, 1_060, 5);
    let t72 = thread(72, 70, 2_900, 7);
    rw.fold(&image(2_000, vec![t71]), vec![exit(1_500, lead)]);
    let mut records = vec![exit(2_950, t71)];
    records.extend(busier(2_800));
    rw.fold(&image(3_000, vec![]), records);
    rw.fold(&image(4_000, vec![t72]), vec![]);
    rw.fold(&image(5_000, vec![]), vec![exit(4_500, t72)]);
    assert_one_row_of_70(rw, image(6_000, vec![]), 3, 13, 7);
}
