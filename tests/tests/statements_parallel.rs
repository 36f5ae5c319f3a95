//! `statements` and PostgreSQL's parallel workers, against a throw-away
//! server (root; common::pg). Truths: the server's own count of workers
//! launched, and the CPU time the kernel gives the postmaster for the
//! children it reaped.
use crate::common;

use std::{
    io::Write,
    process::{Command, Stdio},
};

use common::{
    pg::{Cluster, statements_attached},
    *,
};

/// The postmaster's reaped children's CPU time (cutime + cstime of
/// /proc/PID/stat, ns; the kernel adds each child's whole runtime when the
/// parent reaps it, shown in clock ticks).
fn children_cpu_ns(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let f: Vec<&str> = s[s.rfind(')').unwrap() + 2..].split(' ').collect();
    // Fields 16 and 17 of stat(5), counted from field 3 after the name.
    let ticks: u64 = f[13].parse::<u64>().unwrap() + f[14].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    ticks * 1_000_000_000 / hz
}

/// Three parallel aggregates (two workers asked for each, run under
/// `EXPLAIN ANALYZE` so the server says how many it launched) on one
/// session. Truths: the server's own "Workers Launched", and the CPU time
/// of the postmaster's children reaped over the statements (the workers
/// are the only children that exit meanwhile: autovacuum is off, the
/// session's backend stays, nothing else connects). Each worker's share
/// must join its leader's statement, none may be left over, and the
/// shares' on-CPU must equal the workers' runtime less what a worker runs
/// outside `ParallelWorkerMain` (its start and its exit: 3.4–3.9 ms a
/// worker here over 40 workers, of which bpftrace saw 0.3 ms before the
/// entry and 1.1 ms from the return to `sched_process_exit`; held to
/// 8 ms), the reaped time being exact in ns but shown in 10 ms ticks (two
/// fields, two reads: ±20 ms). Catches workers' CPU missing from the
/// statement or joined to another one.
#[test]
fn parallel_workers_join_their_leaders_statement() {
    if !root_or_skip("parallel_workers_join_their_leaders_statement") {
        return;
    }
    let _serial = serial();
    // Query ids on: the kernel sums the statements and adds the workers'
    // shares into their leaders' open statements itself (without them a
    // record a statement is sent and userspace joins the shares).
    let c = Cluster::start_with("stmt-par", "-c compute_query_id=on");
    c.psql("CREATE TABLE par AS SELECT g AS id FROM generate_series(1, 600000) g");
    c.psql("VACUUM ANALYZE par");
    let pm = c.postmaster_pid();
    // With the ledger, so that every share's account is checked too (the
    // shares come from the same uprobe pair with or without it).
    let (ttp, json) = statements_attached(&c, pm, "20s", "par.json", &["--ledger"]);
    let mut psql = Command::new(c.bin.join("psql"))
        .args(["-X", "-q", "-A", "-t", "-d"])
        .arg(c.conninfo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("psql");
    let mut stdin = psql.stdin.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(psql.stdout.take().unwrap()));
    for set in [
        "max_parallel_workers_per_gather = 2",
        "parallel_setup_cost = 0",
        "parallel_tuple_cost = 0",
        "min_parallel_table_scan_size = 0",
    ] {
        writeln!(stdin, "SET {set};").unwrap();
    }
    writeln!(stdin, "SELECT 'ready';").unwrap();
    stdin.flush().unwrap();
    let mut wait_for = |marker: &str| -> Vec<String> {
        let mut seen = Vec::new();
        for line in lines.by_ref() {
            let line = line.expect("psql output");
            if line.trim() == marker {
                return seen;
            }
            seen.push(line);
        }
        panic!("psql ended before {marker}: {seen:?}");
    };
    wait_for("ready");
    let before = children_cpu_ns(pm);
    // Three fingerprints: a share joined to the wrong statement shows.
    let selects = ["count(*)", "max(id)", "min(id)"];
    for agg in selects {
        writeln!(
            stdin,
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) SELECT {agg} FROM par WHERE md5(id::text) LIKE '%abc%';"
        )
        .unwrap();
    }
    writeln!(stdin, "SELECT 'done';").unwrap();
    stdin.flush().unwrap();
    let plans = wait_for("done");
    let after = children_cpu_ns(pm);
    drop(stdin);
    let _ = psql.wait();
    // One Gather a plan: its "Workers Launched", in statement order.
    let per_plan: Vec<u64> = plans
        .iter()
        .filter_map(|l| l.trim().strip_prefix("Workers Launched: "))
        .map(|n| n.parse::<u64>().unwrap())
        .collect();
    assert_eq!(per_plan.len(), selects.len(), "{plans:?}");
    let launched: u64 = per_plan.iter().sum();
    assert!(launched > 0, "no worker launched: {plans:?}");
    // SIGINT ends the window early; the report is written.
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(ttp.id() as i32, libc::SIGINT) };
    let out = ttp.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_file(&json);
    let groups = doc["groups"].as_array().unwrap();
    let mut shares = 0.0;
    let mut leaders = 0.0;
    for (agg, n) in selects.iter().zip(&per_plan) {
        let g = groups
            .iter()
            .find(|g| {
                g["key"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("select {agg} from par"))
            })
            .unwrap_or_else(|| panic!("the {agg} group in {}", doc["groups"]));
        assert_eq!(g["calls"], 1);
        let w = &g["parallel_workers"];
        assert_eq!(w["workers"], *n, "{agg}: {w}");
        assert_eq!(w["without_account"], 0, "{agg}: {w}");
        shares += w["on_cpu_ns"].as_u64().unwrap() as f64;
        leaders += g["on_cpu_ns"].as_u64().unwrap() as f64;
    }
    assert_eq!(doc["counts"]["worker_shares"], launched);
    assert_eq!(doc["counts"]["worker_shares_unjoined"], 0);
    let reaped = after.saturating_sub(before) as f64;
    eprintln!(
        "{launched} workers: shares' on-CPU {:.1} ms, reaped children's CPU {:.1} ms; leaders' on-CPU {:.1} ms",
        shares / 1e6,
        reaped / 1e6,
        leaders / 1e6
    );
    let tick_slack = 20e6;
    assert!(
        shares <= reaped + tick_slack && shares >= reaped - tick_slack - 8e6 * launched as f64,
        "workers' shares on-CPU {shares} ns against the reaped workers' {reaped} ns"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("+ parallel workers:"), "{text}");
}
