//! The errors of the blame analysis.

/// Errors of the blame analysis.
#[derive(Debug, thiserror::Error)]
pub enum BlameError {
    #[error("the recording is not valid: {what}; re-record it with `ttp-ebpf blame --record`")]
    InvalidRecording { what: String },
    #[error(
        "window {window} lists task {task}, which is not in the recording's tasks; \
         every task a window refers to needs an entry in `tasks`"
    )]
    UnknownTask { window: usize, task: u32 },
    #[error(
        "no thread of pid {pid} in the recording; pass the victim's pid with --pid \
         (the recording's tasks list the pids it saw)"
    )]
    NoVictim { pid: u32 },
    #[error(
        "the recording has no windows: the victim exited (or the measurement stopped) \
         before the first window closed; use a shorter --window"
    )]
    NoWindows,
    #[error(
        "--window {asked_ns} ns is not a multiple of the recorded window {recorded_ns} ns; \
         choose a multiple of it"
    )]
    WindowNotMultiple { asked_ns: u64, recorded_ns: u64 },
}
