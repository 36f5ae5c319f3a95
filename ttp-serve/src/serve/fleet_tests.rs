use std::collections::HashMap;

use ttp_common::{ExitRecord, ThreadAccount};

use super::*;

/// Groups by a table tgid → group, as a test sets it.
#[derive(Default)]
struct Table(HashMap<u32, String>);

impl Grouping for Table {
    fn begin(&mut self) {}
    fn group_of(&mut self, a: &ThreadAccount) -> String {
        self.0
            .get(&a.tgid)
            .cloned()
            .unwrap_or_else(|| UNKNOWN.into())
    }
}

fn account(tid: u32, tgid: u32, on_cpu_ms: u64, read: u64) -> ThreadAccount {
    let mut a = ThreadAccount::zeroed();
    a.tid = tid;
    a.tgid = tgid;
    a.start_time_ns = u64::from(tid) * 10;
    a.on_cpu_ns = on_cpu_ms * 1_000_000;
    a.io.read_bytes = read;
    a
}

fn image(accounts: &[ThreadAccount]) -> Image {
    Image {
        threads: accounts.iter().map(|a| (ThreadKey::of(a), *a)).collect(),
        ..Default::default()
    }
}

fn exit(a: ThreadAccount) -> ExitRecord {
    ExitRecord {
        exit_ns: 1,
        account: a,
    }
}

fn value(f: &Fleet, group: &str) -> Option<LedgerMeasures> {
    f.view()
        .groups
        .into_iter()
        .find(|(g, _)| g == group)
        .map(|(_, m)| m)
}

fn groups(pairs: &[(u32, &str)]) -> Table {
    Table(pairs.iter().map(|(t, g)| (*t, g.to_string())).collect())
}

/// Catches a counter that drops when a thread leaves the map before its
/// exit record is read, and one that counts the thread twice when the
/// record comes (or when its account is read again after the record).
#[test]
fn an_exiting_thread_is_counted_once_and_never_backwards() {
    let mut g = groups(&[(10, "a.service")]);
    let mut f = Fleet::new(None);
    f.refresh(
        &image(&[account(10, 10, 5, 0), account(11, 10, 7, 4096)]),
        &[],
        &mut g,
    );
    assert_eq!(value(&f, "a.service").unwrap().on_cpu_ns, 12_000_000);
    // Thread 11 is gone from the map, its record not yet read.
    f.refresh(&image(&[account(10, 10, 6, 0)]), &[], &mut g);
    assert_eq!(value(&f, "a.service").unwrap().on_cpu_ns, 13_000_000);
    // Its record: 9 ms in all, 2 ms more than last seen.
    f.refresh(
        &image(&[account(10, 10, 6, 0)]),
        &[exit(account(11, 10, 9, 8192))],
        &mut g,
    );
    let v = value(&f, "a.service").unwrap();
    assert_eq!(v.on_cpu_ns, 15_000_000);
    assert_eq!(v.io.read_bytes, 8192);
    // Its account read once more (removed from the map after the record).
    f.refresh(
        &image(&[account(10, 10, 6, 0), account(11, 10, 9, 8192)]),
        &[],
        &mut g,
    );
    assert_eq!(value(&f, "a.service").unwrap().on_cpu_ns, 15_000_000);
    assert_eq!(f.view().vanished_threads, 0);
}

/// Catches a short-lived process (never in an image) whose time is lost,
/// and a thread whose record never comes that takes its time away again.
#[test]
fn short_lived_and_vanished_threads_keep_their_time() {
    let mut g = groups(&[(10, "a"), (20, "a")]);
    let mut f = Fleet::new(None);
    f.refresh(
        &image(&[account(10, 10, 1, 0)]),
        &[exit(account(20, 20, 3, 0))],
        &mut g,
    );
    assert_eq!(value(&f, "a").unwrap().on_cpu_ns, 4_000_000);
    f.refresh(&image(&[]), &[], &mut g);
    f.refresh(&image(&[]), &[], &mut g);
    f.refresh(&image(&[]), &[], &mut g);
    assert_eq!(value(&f, "a").unwrap().on_cpu_ns, 4_000_000);
    assert_eq!(f.view().vanished_threads, 1);
}

/// Catches time moved with a process that changes group: only what it
/// does after the move goes to the new group.
#[test]
fn a_process_that_moves_takes_only_its_future_time() {
    let mut f = Fleet::new(None);
    f.refresh(
        &image(&[account(10, 10, 5, 0)]),
        &[],
        &mut groups(&[(10, "old")]),
    );
    f.refresh(
        &image(&[account(10, 10, 8, 0)]),
        &[],
        &mut groups(&[(10, "new")]),
    );
    assert_eq!(value(&f, "old").unwrap().on_cpu_ns, 5_000_000);
    assert_eq!(value(&f, "new").unwrap().on_cpu_ns, 3_000_000);
}

/// Catches `other` or a group's series going backwards when groups enter
/// and leave the top N, series that do not add up to the total, and more
/// than N + 1 series.
#[test]
fn top_n_folds_without_going_backwards() {
    let mut g = groups(&[(1, "a"), (2, "b"), (3, "c")]);
    let mut f = Fleet::new(Some(1));
    let mut cpu = [0u64; 3];
    let mut previous: HashMap<String, u64> = HashMap::new();
    // Each phase makes another group the busiest.
    let phases = [[50, 1, 1], [1, 80, 1], [1, 1, 200], [90, 1, 1], [1, 1, 1]];
    let mut total = 0;
    for busy in phases {
        for _ in 0..10 {
            for i in 0..3 {
                cpu[i] += busy[i];
                total += busy[i];
            }
            let accounts: Vec<_> = (0..3)
                .map(|i| account(i as u32 + 1, i as u32 + 1, cpu[i], 0))
                .collect();
            f.refresh(&image(&accounts), &[], &mut g);
            let view = f.view();
            assert!(view.groups.len() <= 2, "{:?}", view.groups);
            for (group, m) in &view.groups {
                let before = previous.insert(group.clone(), m.on_cpu_ns).unwrap_or(0);
                assert!(m.on_cpu_ns >= before, "{group} went back");
            }
            // Named series (shown or resting) plus `other` = everything.
            let sum: u64 = f.series.values().map(|m| m.on_cpu_ns).sum::<u64>() + f.other.on_cpu_ns;
            assert_eq!(sum, total * 1_000_000);
        }
    }
    // Each group led once for long enough to be named.
    for g in ["a", "b", "c"] {
        assert!(f.series.get(g).is_some_and(|m| m.on_cpu_ns > 0), "{g}");
    }
}

/// Catches per-CPU series that go backwards when a CPU's open interval is
/// reclassified between reads.
#[test]
fn cpu_series_keep_their_largest_value() {
    let mut f = Fleet::new(None);
    let mut im = image(&[]);
    im.cpus.insert(
        0,
        CpuTimes {
            busy_ns: 10,
            idle_ns: 5,
            iowait_ns: 7,
        },
    );
    f.refresh(&im, &[], &mut Table::default());
    im.cpus.insert(
        0,
        CpuTimes {
            busy_ns: 12,
            idle_ns: 9,
            iowait_ns: 6,
        },
    );
    f.refresh(&im, &[], &mut Table::default());
    assert_eq!(
        f.view().cpus[&0],
        CpuTimes {
            busy_ns: 12,
            idle_ns: 9,
            iowait_ns: 7
        }
    );
}

/// Catches a child that exited before it was seen put in `unknown` when
/// its parent's group is known.
#[test]
fn an_unseen_child_takes_its_parents_group() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("100")).unwrap();
    std::fs::write(
        dir.path().join("100/cgroup"),
        "0::/system.slice/db.service\n",
    )
    .unwrap();
    let mut g = ProcGroups::new(GroupBy::Unit, dir.path());
    g.begin();
    let mut child = account(200, 200, 1, 0);
    child.parent_tgid = 100;
    assert_eq!(g.group_of(&child), "db.service");
    // A grandchild whose parent (the child) is gone too.
    let mut grandchild = account(300, 300, 1, 0);
    grandchild.parent_tgid = 200;
    g.note(&child);
    g.note(&grandchild);
    assert_eq!(g.group_of(&grandchild), "db.service");
    child.parent_tgid = 0;
    assert_eq!(g.group_of(&child), UNKNOWN);
}
