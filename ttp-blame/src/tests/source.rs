//! Collecting windows from a live source: a victim that exits mid-way, a
//! duration limit, Ctrl-C, and a victim that does not exist.
use std::sync::atomic::AtomicBool;

use super::*;
use crate::{
    Options,
    source::{self, SourceError, StopReason, WindowSource},
};
use ttp_window::window::blame_record::Resource;

/// Yields scripted windows, then `None` as the ledger does once the victim
/// has exited.
struct Scripted {
    windows: std::vec::IntoIter<Window>,
    tasks: Vec<TaskInfo>,
}

impl WindowSource for Scripted {
    fn window_ns(&self) -> u64 {
        50 * MS
    }
    fn sources(&self) -> Sources {
        all_sources()
    }
    fn next_window(&mut self) -> Result<Option<Window>, SourceError> {
        Ok(self.windows.next())
    }
    fn tasks(&self) -> Vec<TaskInfo> {
        self.tasks.clone()
    }
}

/// The victim (pid 1) exits 170 ms in: three full windows, then a 20 ms one.
/// In each the victim runs half of what is left on cpu0 and waits 5 ms; a
/// burner (pid 2) runs the rest.
fn exiting() -> Scripted {
    let mut windows: Vec<Window> = (0..3)
        .map(|i| {
            let mut w = window(i, 50 * MS);
            w.cpus = vec![cpu(0, Some(0), None)];
            w.tasks = vec![
                Tw::new(1).on_cpu(0, 25 * MS).wait(0, 5 * MS).done(),
                Tw::new(2).on_cpu(0, 25 * MS).done(),
            ];
            w
        })
        .collect();
    let mut last = window(3, 50 * MS);
    last.end_ns = last.start_ns + 20 * MS;
    last.cpus = vec![cpu(0, Some(0), None)];
    last.tasks = vec![
        Tw::new(1).on_cpu(0, 10 * MS).wait(0, 5 * MS).done(),
        Tw::new(2).on_cpu(0, 10 * MS).done(),
    ];
    windows.push(last);
    let mut victim = proc_task(1, "victim");
    victim.exit_ns = Some(170 * MS);
    Scripted {
        windows: windows.into_iter(),
        tasks: vec![victim, proc_task(2, "burner")],
    }
}

fn spec() -> VictimSpec {
    VictimSpec {
        pid: 1,
        children: false,
    }
}

/// Windows stop when the victim exits; the partial last window counts with
/// its real length. Catches a nominal δt used for the last window: cpu0
/// would then show 30 ms of unknown consumption and the burner would get
/// only 5 × 10/40 ms of the last window's wait instead of all 5 ms.
#[test]
fn victim_exiting_mid_way_ends_the_windows() {
    let stop = AtomicBool::new(false);
    let mut seen = 0;
    let (rec, reason) =
        source::collect(&mut exiting(), spec(), None, &stop, |_| seen += 1).unwrap();
    assert_eq!(
        (reason, rec.windows.len(), seen),
        (StopReason::VictimExited, 4, 4)
    );
    let report = crate::analyze(&rec, &Options::default()).unwrap();
    assert_eq!(report.victim.exited_after_ns, Some(170 * MS));
    assert_eq!(report.span_ns, 170 * MS);
    let b = blame_by_pid(&report);
    assert!(close(b[&(Some(2), Resource::Cpu)], 20.0 * MS as f64));
    assert!(!b.contains_key(&(None, Resource::Cpu)));
}

/// `--duration` stops after enough windows; Ctrl-C stops before the next.
#[test]
fn duration_and_interrupt_stop_collection() {
    let stop = AtomicBool::new(false);
    let (rec, reason) =
        source::collect(&mut exiting(), spec(), Some(100 * MS), &stop, |_| {}).unwrap();
    assert_eq!((reason, rec.windows.len()), (StopReason::Duration, 2));
    let stop = AtomicBool::new(true);
    let (rec, reason) = source::collect(&mut exiting(), spec(), None, &stop, |_| {}).unwrap();
    assert_eq!((reason, rec.windows.len()), (StopReason::Interrupted, 0));
    // Nothing measured: the analysis says so instead of reporting zeros.
    assert!(matches!(
        crate::analyze(&rec, &Options::default()),
        Err(crate::BlameError::NoWindows)
    ));
}

/// A pid without a /proc entry is refused before anything is loaded.
#[test]
fn missing_victim_process_is_refused() {
    let root = std::env::temp_dir().join(format!("ttp-blame-proc-{}", std::process::id()));
    std::fs::create_dir_all(root.join("42")).unwrap();
    assert!(source::check_victim(&root, 42).is_ok());
    assert!(matches!(
        source::check_victim(&root, 43),
        Err(SourceError::NoSuchProcess { pid: 43 })
    ));
    assert!(source::check_victim(&root, 0).is_err());
    std::fs::remove_dir_all(&root).unwrap();
}
