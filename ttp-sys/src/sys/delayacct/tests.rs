//! The delay-accounting guard and its state file on a temporary run
//! directory and a fake sysctl file: what each instance records, who
//! restores, and what a dead instance's record leads to.
use std::{fs::File, path::Path};

use super::*;
use crate::sys::run_state::{Outcome, Tracked, flock};

fn setup(value: &str) -> (tempfile::TempDir, Tracked) {
    let dir = tempfile::tempdir().unwrap();
    let sysctl = dir.path().join("task_delayacct");
    std::fs::write(&sysctl, format!("{value}\n")).unwrap();
    let t = Tracked {
        id: "delayacct",
        setting: "kernel.task_delayacct",
        path: sysctl,
        dir: dir.path().join("run"),
    };
    (dir, t)
}

fn value(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap().trim().to_string()
}

/// Catches a change made before it is recorded, or a record left after a
/// normal end.
#[test]
fn records_before_switching_on_and_restores_on_drop() {
    let (_d, t) = setup("0");
    let g = DelayAcct::enable_at(t.clone()).unwrap();
    assert!(g.switched_on());
    assert_eq!(value(&t.path), "1");
    let c = t.recorded().unwrap().expect("state file");
    assert_eq!((c.original.as_str(), c.set_to.as_str()), ("0", "1"));
    assert_eq!(c.pid, std::process::id());
    drop(g);
    assert_eq!(value(&t.path), "0");
    assert!(
        !t.state_path().exists(),
        "state file left after a normal end"
    );
}

/// Catches the first instance out switching accounting off under a second
/// one still measuring, and the second losing the original value.
#[test]
fn the_last_instance_out_restores() {
    let (_d, t) = setup("0");
    let a = DelayAcct::enable_at(t.clone()).unwrap();
    let b = DelayAcct::enable_at(t.clone()).unwrap();
    assert!(b.switched_on(), "the second instance must know it was off");
    drop(a);
    assert_eq!(value(&t.path), "1");
    drop(b);
    assert_eq!(value(&t.path), "0");
}

/// A second instance that finds a live holder but accounting off (switched
/// off by hand meanwhile): it switches it on again, and the last one out
/// restores the original. Catches an instance that trusts the lock alone
/// and measures with accounting off.
#[test]
fn a_later_holder_switches_it_on_again_when_found_off() {
    let (_d, t) = setup("0");
    let a = DelayAcct::enable_at(t.clone()).unwrap();
    t.set("0").unwrap();
    let b = DelayAcct::enable_at(t.clone()).unwrap();
    assert_eq!(value(&t.path), "1");
    assert!(b.switched_on());
    drop(a);
    assert_eq!(value(&t.path), "1");
    drop(b);
    assert_eq!(value(&t.path), "0");
}

/// A first holder that found it on (nothing recorded), then switched off
/// by hand: the second records "0" before switching it on, and the last
/// one out puts back "0".
#[test]
fn a_later_holder_records_before_switching_on() {
    let (_d, t) = setup("1");
    let a = DelayAcct::enable_at(t.clone()).unwrap();
    t.set("0").unwrap();
    let b = DelayAcct::enable_at(t.clone()).unwrap();
    assert_eq!(value(&t.path), "1");
    let c = t.recorded().unwrap().expect("recorded before the change");
    assert_eq!(c.original, "0");
    drop(b);
    drop(a);
    assert_eq!(value(&t.path), "0");
}

/// Already on: nothing recorded, nothing changed on the way out.
#[test]
fn already_on_is_left_alone() {
    let (_d, t) = setup("1");
    let g = DelayAcct::enable_at(t.clone()).unwrap();
    assert!(!g.switched_on());
    assert!(!t.state_path().exists());
    drop(g);
    assert_eq!(value(&t.path), "1");
}

/// The state a SIGKILLed instance leaves: its record, the setting changed,
/// no lock held (the kernel drops the locks of a dead process).
fn dead_instance(t: &Tracked, original: &str, pid_value: &str) {
    std::fs::create_dir_all(&t.dir).unwrap();
    t.record(original, "1").unwrap();
    t.set(pid_value).unwrap();
}

/// Catches the bug of issue 17: the next instance took the leftover "1" for
/// the machine's own value, and kept it on for good.
#[test]
fn a_dead_instances_change_is_restored_by_the_next_one() {
    let (_d, t) = setup("0");
    dead_instance(&t, "0", "1");
    let g = DelayAcct::enable_at(t.clone()).unwrap();
    let l = g.leftover().expect("leftover reported");
    assert_eq!(l.outcome, Outcome::Restored);
    assert_eq!((l.original.as_str(), l.found.as_str()), ("0", "1"));
    assert!(g.switched_on(), "it was off before the dead instance");
    assert_eq!(t.recorded().unwrap().unwrap().original, "0");
    drop(g);
    assert_eq!(value(&t.path), "0");
}

/// `check` and sessions without delay accounting: restore, say so, forget.
#[test]
fn restore_leftover_without_enabling() {
    let (_d, t) = setup("0");
    dead_instance(&t, "0", "1");
    let l = t.restore_leftover().expect("leftover");
    assert_eq!(l.outcome, Outcome::Restored);
    assert_eq!(value(&t.path), "0");
    assert!(!t.state_path().exists());
    assert!(l.to_string().contains("restored kernel.task_delayacct = 0"));
    assert!(t.restore_leftover().is_none(), "restored twice");
}

/// Catches restoring under a live instance (which holds the lock).
#[test]
fn a_live_holder_keeps_its_change() {
    let (_d, t) = setup("0");
    let g = DelayAcct::enable_at(t.clone()).unwrap();
    assert!(t.restore_leftover().is_none());
    assert_eq!(value(&t.path), "1");
    // Another process's shared lock, as a live instance of another build
    // holds it.
    let other = File::open(t.lock_path()).unwrap();
    assert!(flock(&other, libc::LOCK_SH | libc::LOCK_NB));
    drop(g);
    assert_eq!(value(&t.path), "1", "restored under a live holder");
    assert!(t.restore_leftover().is_none());
    drop(other);
    assert_eq!(
        t.restore_leftover().map(|l| l.outcome),
        Some(Outcome::Restored)
    );
    assert_eq!(value(&t.path), "0");
}

/// Someone set another value after the dead instance: theirs is kept.
#[test]
fn a_value_set_since_is_kept() {
    let (_d, t) = setup("0");
    dead_instance(&t, "0", "2");
    let l = t.restore_leftover().unwrap();
    assert_eq!(l.outcome, Outcome::ChangedSince);
    assert_eq!(value(&t.path), "2");
    assert!(!t.state_path().exists());
}

/// Killed between the record and the change: nothing to restore or report.
#[test]
fn killed_before_the_change() {
    let (_d, t) = setup("0");
    dead_instance(&t, "0", "0");
    assert!(t.restore_leftover().is_none());
    assert!(!t.state_path().exists());
}

/// A cut or foreign state file never panics and never blocks a measurement.
#[test]
fn an_unreadable_record_is_dropped() {
    let (_d, t) = setup("0");
    std::fs::create_dir_all(&t.dir).unwrap();
    std::fs::write(t.state_path(), b"{\"schema\":\"ttp.chan").unwrap();
    let g = DelayAcct::enable_at(t.clone()).unwrap();
    assert!(g.leftover().is_none());
    assert_eq!(t.recorded().unwrap().unwrap().original, "0");
    drop(g);
    assert_eq!(value(&t.path), "0");
}

/// No run directory (nothing ever changed): nothing created, nothing found.
#[test]
fn no_run_directory() {
    let (_d, t) = setup("1");
    assert!(t.restore_leftover().is_none());
    assert!(!t.dir.exists());
}

/// Catches a measurement undoing `check --fix`: a value set deliberately
/// while an instance measures is what the last one leaves.
#[test]
fn a_deliberate_value_outlasts_the_measurement() {
    let (_d, t) = setup("0");
    let g = DelayAcct::enable_at(t.clone()).unwrap();
    assert!(t.keep_as_original("1").unwrap());
    drop(g);
    assert_eq!(value(&t.path), "1");
    assert!(!t.state_path().exists());
    // Nothing recorded: nothing to keep.
    assert!(!t.keep_as_original("1").unwrap());
}
