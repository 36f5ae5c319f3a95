//! The ledger's bytes against /proc/PID/io where bios merge into requests
//! (root; see common::root_or_skip).
use crate::common;

use common::*;
use ttp_ledger::{
    accounts::Window,
    probe::{Ledger, seed},
};

/// Read merges of the machine's real disks (/proc/diskstats' second
/// counter), and whether merging is on for every one of them
/// (`queue/nomerges` 0).
fn disks_read_merges() -> (u64, bool) {
    let s = std::fs::read_to_string("/proc/diskstats").expect("/proc/diskstats");
    let mut merges = 0;
    let mut merging = true;
    for l in s.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let Some(&name) = f.get(2) else { continue };
        let dev = std::path::Path::new("/sys/block").join(name);
        let virt = ["loop", "ram", "dm-", "zram", "sr"]
            .iter()
            .any(|p| name.starts_with(p));
        if !dev.exists() || virt {
            continue;
        }
        merges += f.get(4).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        merging &=
            std::fs::read_to_string(dev.join("queue/nomerges")).is_ok_and(|n| n.trim() == "0");
    }
    (merges, merging)
}

/// A process reads 64 MiB with O_DIRECT in reads of 300 pages scattered in
/// memory (`--scatter`): a bio holds at most 256 vectors, so each read
/// takes two bios, and the block layer merges the second into the last
/// request of the first in the submitter's plug (about one read merge a
/// read on the virtio disk here). Catches bytes off against /proc/PID/io
/// when a bio joins a request instead of making one: the ledger counts
/// bytes per bio (`block_bio_queue`), and a count taken from the requests
/// alone missed the merged bios (57 774 080 bytes of 67 108 864 in a build
/// that tried it, docs/ledger-cost.md "One program fewer a request").
#[test]
fn direct_reads_with_merged_bios_match_the_kernel() {
    if !root_or_skip("direct_reads_with_merged_bios_match_the_kernel") {
        return;
    }
    let _serial = serial();
    let mut ledger = Ledger::attach().expect("attach the ledger");
    let mut fx = Held::start(
        "fixture-mixed",
        &[
            "--cpu-ms",
            "0",
            "--read-mib",
            "64",
            "--block-kib",
            "1200",
            "--scatter",
        ],
    );
    ledger.seed(&seed::threads_from_proc());
    let pid = fx.pid();
    fx.wait_asleep();
    let io0 = proc_read_bytes(pid);
    let (merges0, merging) = disks_read_merges();
    let before = image(&ledger);
    fx.go();
    let done = fx.line_then_asleep();
    let after = image(&ledger);
    let merges = disks_read_merges().0 - merges0;
    let io1 = proc_read_bytes(pid);
    fx.finish();
    let w = Window::between(&before, &after, &[]);
    let k = &w.processes[&pid].kernel;
    eprintln!(
        "fixture said {done}ledger: {:?}\n/proc/PID/io Δread_bytes {}, disks' read merges {merges}",
        k.io,
        io1 - io0
    );
    assert_eq!(k.io.read_bytes, io1 - io0, "read bytes vs /proc/PID/io");
    assert!(
        k.io.read_bytes >= 64 << 20,
        "read bytes {} below the fixture's 64 MiB",
        k.io.read_bytes
    );
    if merging {
        assert!(
            merges > 0,
            "no read merged on any disk: the case is not met"
        );
    }
    assert_eq!(w.lost.losses(), 0, "lost: {:?}", w.lost);
}
