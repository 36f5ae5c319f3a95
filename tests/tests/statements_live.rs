//! `statements --live`: a screen of the last second's groups every second
//! while measuring, and the report of the whole window at the end, from
//! the kernel's sums (the default) and from a record a statement
//! (`--each`). Truth: pgbench's own count of what it sent.
use crate::{
    common::{self, pg::Cluster},
    statements_socket::{group, n, pgbench, statements, stop},
};

/// `pgbench -c 1 -t 200` of `SELECT pg_sleep(0.01)` (over 2 s) while
/// `statements --live` measures, summed and with `--each`. At least two
/// screens came, one of them showing the statement's group, and the final
/// report counts all 200, as without `--live`. Catches a live loop that
/// shows nothing, that takes the statements it shows from the report, or
/// that ends the window early.
#[test]
fn live_screens_come_every_second_and_the_report_covers_the_window() {
    if !common::root_or_skip("live_screens_come_every_second_and_the_report_covers_the_window") {
        return;
    }
    let _serial = common::serial();
    let c = Cluster::start("sock-live");
    let script = c.dir.join("sleep.sql");
    std::fs::write(&script, "SELECT pg_sleep(0.01);\n").unwrap();
    for extra in [&["--live"][..], &["--live", "--each"][..]] {
        let (ttp, json) = statements(&c, "live.json", extra);
        pgbench(
            &c,
            None,
            &[],
            &["-n", "-c", "1", "-t", "200", "-f", script.to_str().unwrap()],
        );
        // The last second's screen after pgbench's end.
        std::thread::sleep(std::time::Duration::from_millis(1200));
        let (text, doc) = stop(ttp, &json);
        let screens: Vec<&str> = text.split("ttp statements --live:").skip(1).collect();
        assert!(screens.len() >= 2, "{extra:?}: {} screens", screens.len());
        assert!(
            screens
                .iter()
                .any(|s| s.lines().any(|l| l.ends_with("select pg_sleep($1)"))),
            "{extra:?}: no screen shows the statement: {text}"
        );
        assert!(
            text.contains("ttp statements: postmaster"),
            "{extra:?}: no final report: {text}"
        );
        let g = group(&doc, "select pg_sleep($1)").expect("the statement's group");
        assert_eq!(n(g, "calls"), 200, "{extra:?}: {g}");
    }
}
