//! Block requests whose slot another request in flight holds, measured
//! through the overflow hash (ttp-ebpf/src/block.rs; root, see
//! common::root_or_skip).
use crate::common;

use common::*;
use ttp_ledger::{
    accounts::Window,
    probe::{AttachOptions, Ledger, seed},
};

/// Two processes read the same disk at once, measured by two ledgers
/// loaded together: one as every command loads it, one with a single slot
/// for the block requests in flight, so that a request whose slot the
/// other reader's request holds goes to the overflow hash
/// (ttp-ebpf/src/block.rs; on a real machine's 4 096 slots that path is
/// rare, so no other test reaches it). Catches a request of that hash not
/// found at its issue or completion (its device and queue time missing,
/// its process left in service or never in it: own-I/O time off), a hash
/// entry left behind (ended late at its reuse), and a path no request
/// took. Reference: the ledger with its full slots, which the tests
/// above hold to the kernel's counters; both see the same events, their
/// programs one after the other at each tracepoint, so a request's
/// intervals differ by the other's run (under a microsecond): 3 % or 2 ms.
#[test]
fn requests_beside_a_held_slot_are_measured_through_the_overflow_hash() {
    if !root_or_skip("requests_beside_a_held_slot_are_measured_through_the_overflow_hash") {
        return;
    }
    let _serial = serial();
    let dir = std::env::temp_dir();
    let mut full = Ledger::attach().expect("attach the ledger");
    let mut narrow = Ledger::attach_with(&AttachOptions {
        request_slot_bits: Some(0),
        ..Default::default()
    })
    .expect("attach the ledger with one request slot");
    let start = |name: &str| {
        let file = dir.join(name).display().to_string();
        Held::start(
            "fixture-mixed",
            &[
                "--cpu-ms",
                "1",
                "--read-mib",
                "32",
                "--block-kib",
                "16",
                "--file",
                &file,
            ],
        )
    };
    let (mut r1, mut r2) = (
        start("ttp-test-overflow-1.dat"),
        start("ttp-test-overflow-2.dat"),
    );
    let threads = seed::threads_from_proc();
    full.seed(&threads);
    narrow.seed(&threads);
    let before = [image(&full), image(&narrow)];
    r1.go();
    r2.go();
    r1.line();
    r2.line();
    let after = [image(&full), image(&narrow)];
    let pids = [r1.pid(), r2.pid()];
    r1.finish();
    r2.finish();
    let f = Window::between(&before[0], &after[0], &[]);
    let n = Window::between(&before[1], &after[1], &[]);
    eprintln!(
        "full ledger lost {:?}\none-slot ledger lost {:?}",
        f.lost, n.lost
    );
    assert!(
        n.lost.requests_in_overflow > 0,
        "no request went to the overflow hash: the path is not tested"
    );
    for pid in pids {
        let (k, o) = (&f.processes[&pid].kernel, &n.processes[&pid].kernel);
        eprintln!("pid {pid}\n full {k:?}\n one slot {o:?}");
        assert!(
            read_bytes_cover(o.io.read_bytes, 32 << 20),
            "read bytes {}",
            o.io.read_bytes
        );
        assert_eq!(o.io.read_requests, k.io.read_requests);
        for (what, a, b) in [
            ("device_ns", o.io.device_ns, k.io.device_ns),
            ("queue_ns", o.io.queue_ns, k.io.queue_ns),
            ("iowait_own_ns", o.iowait_own_ns, k.iowait_own_ns),
        ] {
            assert!(
                within(a as f64, b as f64, 0.03, 2e6),
                "{what}: one slot {a} against all slots {b}"
            );
        }
        assert!(
            o.iowait_own_ns > 0 && o.iowait_own_ns < o.iowait_ns,
            "own {} must be above 0 and below the iowait {} when the disk is shared",
            o.iowait_own_ns,
            o.iowait_ns
        );
    }
    assert!(
        n.lost.requests_ended_at_reuse <= f.lost.requests_ended_at_reuse + 2,
        "requests ended late at their reuse: {} against {} with all slots",
        n.lost.requests_ended_at_reuse,
        f.lost.requests_ended_at_reuse
    );
    assert_eq!(n.lost.losses(), 0, "lost: {:?}", n.lost);
}
