//! Live contention blame against workloads whose answer is known (root).
mod common;

use common::*;
use ttp_user::probe::Ledger;

/// Outside blame mode the detail hooks in sched_switch must be dead code
/// the verifier removes (DETAIL_ENABLED is a frozen read-only global): the
/// plain ledger's sched_switch is then smaller than blame mode's. Catches a
/// gate the verifier cannot fold, which would make every `attach` pay for
/// blame on each context switch.
#[test]
fn detail_hooks_are_removed_outside_blame_mode() {
    if !root_or_skip("detail_hooks_are_removed_outside_blame_mode") {
        return;
    }
    let _serial = serial();
    let plain = Ledger::attach().expect("attach the ledger");
    let plain_bytes = plain
        .program_jited_bytes("sched_switch")
        .expect("jited size");
    drop(plain);
    let blame = Ledger::attach_blame().expect("attach the ledger with the blame detail");
    let blame_bytes = blame
        .program_jited_bytes("sched_switch")
        .expect("jited size");
    let avail = blame.detail_availability().expect("detail loaded");
    eprintln!("sched_switch JIT: {plain_bytes} B plain, {blame_bytes} B blame; {avail:?}");
    assert!(plain_bytes < blame_bytes, "{plain_bytes} vs {blame_bytes}");
    assert!(avail.disk_devices && avail.direct_reclaim, "{avail:?}");
}
