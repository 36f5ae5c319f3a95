//! Tests of window/qe.rs: exit records summed per thread group, the roles
//! of a QE's processes (window/target.rs), App. B's sets.
use super::*;
use crate::window::context::classify;

fn thread_exit(tid: u32, tgid: u32, utime_us: u64, stime_us: u64, rt_ns: u64) -> TaskstatsRecord {
    use ttp_ledger::collect::taskstats::{Origin, Taskstats};
    let mut b = vec![0u8; 416];
    b[0..2].copy_from_slice(&16u16.to_ne_bytes());
    b[72..80].copy_from_slice(&rt_ns.to_ne_bytes());
    b[128..132].copy_from_slice(&tid.to_ne_bytes());
    b[152..160].copy_from_slice(&utime_us.to_ne_bytes());
    b[160..168].copy_from_slice(&stime_us.to_ne_bytes());
    b[368..372].copy_from_slice(&tgid.to_ne_bytes());
    let origin = Origin {
        exit: true,
        delayacct_on: true,
    };
    TaskstatsRecord {
        scope: TsScope::Task,
        id: tid,
        stats: Taskstats::decode(&b, TsScope::Task, origin).unwrap(),
    }
}

/// A 4-thread process (300 ms per worker) and a single-threaded one.
/// Catches taking the main thread's record as the process's (U = S = 0
/// for a program whose workers did all the work), and
/// a split of the exact runtime that differs from the kernel's
/// cputime_adjust (user share = sampled utime / (utime + stime)).
#[test]
fn exited_thread_group_sums_its_threads() {
    let mut recs = vec![thread_exit(100, 100, 0, 4_000, 1_000_000)];
    for t in 101..105 {
        recs.push(thread_exit(t, 100, 296_000, 4_000, 300_000_000));
    }
    recs.push(thread_exit(200, 200, 8_000, 0, 9_000_000));
    let g = GroupExit::by_tgid(&recs);
    let p = &g[&100];
    assert_eq!(p.threads, 5);
    assert_eq!(p.runtime_ns, Some(1_201_000_000));
    let (u, s) = p.adjusted_ns();
    // Sampled 1184 ms user, 20 ms system → runtime split 1184 : 20.
    let s_expect = (20u128 * 1_201_000_000 / 1204) as u64;
    assert_eq!(s, Some(s_expect));
    assert_eq!(u, Some(1_201_000_000 - s_expect));
    assert_eq!(g[&200].adjusted_ns(), (Some(9_000_000), Some(0)));
}

fn entry(pid: u32, state: char) -> crate::window::procs::ProcEntry {
    use ttp_ledger::collect::proc_pid::{Counters, ProcImage, Scope};
    crate::window::procs::ProcEntry {
        process: ProcImage {
            scope: Scope::Process,
            pid: pid as i32,
            tgid: pid as i32,
            comm: format!("p{pid}"),
            state,
            ppid: 1,
            uid: 0,
            euid: 0,
            starttime_ticks: 100 + u64::from(pid),
            num_threads: Some(1),
            processor: Some(0),
            counters: Counters::default(),
        },
        threads: vec![],
        taskstats: None,
    }
}

/// App. B: a process in the after-image that is gone when listening
/// stops, with no exit record, is not Continuing (nor Stopped), so QE1
/// finds it as P_y or P_z (ttp-ttpv2/src/ephemeral.rs,
/// `observed_continuing_exposes_py_and_pz`). A zombie of M2 and a process
/// whose exit was recorded after M2 are stopped, not continuing. Catches
/// Continuing taken as "not a zombie in M2", with which P_y and P_z could
/// never be found in a live run.
#[test]
fn processes_gone_after_the_after_image_are_not_continuing() {
    let mut m2 = ProcSet::default();
    for (pid, state) in [(1, 'S'), (2, 'S'), (3, 'R'), (4, 'Z'), (5, 'S')] {
        m2.procs.insert(pid, entry(pid, state));
    }
    // 1 lives on; 2 and 3 vanish unrecorded; 5 exits with a record.
    let alive_at_end: BTreeSet<u32> = [1, 4].into();
    let late_exited: BTreeSet<u32> = [5].into();
    assert_eq!(continuing_pids(&m2, &alive_at_end, &late_exited), vec![1]);
    // Everything alive and nothing recorded: every non-zombie continues.
    let all: BTreeSet<u32> = [1, 2, 3, 4, 5].into();
    assert_eq!(
        continuing_pids(&m2, &all, &BTreeSet::new()),
        vec![1, 2, 3, 5]
    );
}

/// Catches the roles of a DBMS mixed up: the backend must be the one
/// query process, the postmaster and its other children (checkpointer,
/// other backends) utilities, ttp the executor, the rest daemons.
#[test]
fn server_roles() {
    let roles = Roles::Server {
        query: 12,
        server: 10,
    };
    // Descendants of the postmaster (10): its children 11, 12, 13.
    let tree: BTreeSet<u32> = [10, 11, 12, 13].into();
    let c = |pid, comm| classify(roles, 99, &[], false, (pid, comm), &tree);
    assert_eq!(c(12, "postgres"), ProcessClass::Query);
    assert_eq!(c(10, "postgres"), ProcessClass::Utility);
    assert_eq!(c(11, "postgres"), ProcessClass::Utility);
    assert_eq!(c(13, "postgres"), ProcessClass::Utility);
    assert_eq!(c(99, "ttp-ebpf"), ProcessClass::Executor);
    assert_eq!(c(50, "postgres"), ProcessClass::Daemon, "another server");
    assert_eq!(c(51, "sshd"), ProcessClass::Daemon);
}

/// Catches the command path changed by the server path: the command's
/// tree is the query, or a utility when the query process is chosen by
/// name; --utility names still count.
#[test]
fn command_roles() {
    let roles = Roles::CommandTree { root: 20 };
    let tree: BTreeSet<u32> = [20, 21].into();
    let utils = vec!["mysqld".to_string()];
    let c = |by_name, pid, comm| classify(roles, 99, &utils, by_name, (pid, comm), &tree);
    assert_eq!(c(false, 21, "sh"), ProcessClass::Query);
    assert_eq!(c(true, 21, "sh"), ProcessClass::Utility);
    assert_eq!(c(false, 30, "mysqld"), ProcessClass::Utility);
    assert_eq!(c(false, 31, "cron"), ProcessClass::Daemon);
    assert_eq!(c(false, 99, "ttp-ebpf"), ProcessClass::Executor);
}
