//! What ttp changed on the machine, written down before it is changed, so
//! that a ttp killed with SIGKILL (no destructor runs, no signal handler)
//! does not leave the machine changed for good.
//!
//! Each setting ttp changes for the length of a measurement
//! (`kernel.task_delayacct`, and free page reporting's order while `run`
//! measures; the BPF statistics switch is a file descriptor and the
//! programs, links and uprobes are descriptors too, all closed by the
//! kernel when the process dies) has, under `/run/ttp/` (sys/held.rs):
//!
//! - `<id>.lock`: every live instance that relies on the change holds a
//!   shared `flock` on it for as long as it measures; the kernel drops the
//!   lock of a dead process. An exclusive lock that can be taken at once
//!   therefore means no live instance holds the setting.
//! - `<id>.json` (schema `ttp.changed/1`): the value before ttp changed it
//!   and the value it set, written atomically *before* the change.
//!
//! Every step that tests or takes the exclusive lock holds `flock` on the
//! directory itself, so that converting a shared lock to an exclusive one
//! (which `flock` does not do atomically) is never observed by another
//! instance. A state file with nobody holding the lock is a leftover of a
//! dead instance: the next ttp command that measures, and `check`, put the
//! original value back (unless someone has set another value since) and say
//! so. /run is a tmpfs, so a reboot clears both the files and the change.
use std::{
    fs::{File, OpenOptions},
    io,
    os::fd::AsRawFd,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

/// Where the state files live (a tmpfs, cleared at boot like the settings).
pub(crate) const RUN_DIR: &str = "/run/ttp";

/// Schema of a state file.
pub const SCHEMA: &str = "ttp.changed/1";

/// One change ttp made, as recorded before it was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Change {
    pub schema: String,
    /// The setting's name (`kernel.task_delayacct`).
    pub setting: String,
    /// The file that holds it.
    pub path: PathBuf,
    /// Its value before ttp changed it.
    pub original: String,
    /// The value ttp set.
    pub set_to: String,
    /// The ttp process that made the change.
    pub pid: u32,
}

/// What became of a change a dead instance left behind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// The original value is back.
    Restored,
    /// The setting no longer has the value ttp set: someone changed it
    /// since, and their value is left as it is.
    ChangedSince,
    /// It could not be put back.
    Failed { error: String },
}

/// A change left by a ttp instance that ended without undoing it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leftover {
    pub setting: String,
    pub original: String,
    pub set_to: String,
    /// The instance that made it (no longer running).
    pub left_by_pid: u32,
    /// The value found now, before anything was done.
    pub found: String,
    #[serde(flatten)]
    pub outcome: Outcome,
}

impl std::fmt::Display for Leftover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Leftover {
            setting,
            original,
            set_to,
            left_by_pid,
            found,
            ..
        } = self;
        let what = format!(
            "{setting} = {set_to} was left by ttp process {left_by_pid}, which ended without restoring it"
        );
        match &self.outcome {
            Outcome::Restored => write!(f, "{what}: restored {setting} = {original}"),
            Outcome::ChangedSince => write!(
                f,
                "{what}: it is now {found}, set since by someone else, so it is left as it is (it was {original} before ttp)"
            ),
            Outcome::Failed { error } => write!(
                f,
                "{what}: cannot restore it ({error}); run `sudo ttp-ebpf check`, or `{}`",
                by_hand(setting, original)
            ),
        }
    }
}

/// A setting ttp changes while it measures, and where its state lives.
#[derive(Debug, Clone)]
pub struct Tracked {
    /// File-name stem under the run directory (`delayacct`).
    pub id: &'static str,
    /// The setting's name, for people.
    pub setting: &'static str,
    /// The file that holds the value.
    pub path: PathBuf,
    /// The run directory (`/run/ttp`; a temporary directory in tests).
    pub dir: PathBuf,
}

/// `flock` on an open file; false when it would block (with LOCK_NB) or fails.
pub(crate) fn flock(f: &File, op: libc::c_int) -> bool {
    loop {
        // SAFETY: flock on an open descriptor.
        if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
            return true;
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return false;
        }
    }
}

/// The run directory locked exclusively; unlocked when dropped.
pub(crate) struct DirLock(File);

impl Drop for DirLock {
    fn drop(&mut self) {
        flock(&self.0, libc::LOCK_UN);
    }
}

impl Tracked {
    pub(crate) fn lock_path(&self) -> PathBuf {
        self.dir.join(format!("{}.lock", self.id))
    }

    pub(crate) fn state_path(&self) -> PathBuf {
        self.dir.join(format!("{}.json", self.id))
    }

    /// Locks the run directory, creating it when `create` (only an instance
    /// about to change something needs to). None when it does not exist.
    pub(crate) fn lock_dir(&self, create: bool) -> io::Result<Option<DirLock>> {
        if create {
            std::fs::create_dir_all(&self.dir)?;
        }
        let dir = match File::open(&self.dir) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound && !create => return Ok(None),
            Err(e) => return Err(e),
        };
        if !flock(&dir, libc::LOCK_EX) {
            return Err(io::Error::last_os_error());
        }
        Ok(Some(DirLock(dir)))
    }

    /// Opens the holders' lock file (created when `create`).
    pub(crate) fn open_lock(&self, create: bool) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(create)
            .create(create)
            .truncate(false)
            .open(self.lock_path())
    }

    /// The recorded change, if any. A file that cannot be parsed (cut short
    /// by a full disk, or written by hand) is reported as an error.
    pub(crate) fn recorded(&self) -> io::Result<Option<Change>> {
        match std::fs::read(self.state_path()) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes the state file atomically; call before changing the setting.
    pub fn record(&self, original: &str, set_to: &str) -> io::Result<()> {
        let change = Change {
            schema: SCHEMA.into(),
            setting: self.setting.into(),
            path: self.path.clone(),
            original: original.into(),
            set_to: set_to.into(),
            pid: std::process::id(),
        };
        // Not chowned to the invoking user: this file is the machine's.
        super::atomic::write_as_is(
            &self.state_path(),
            &serde_json::to_vec_pretty(&change).map_err(io::Error::other)?,
        )
    }

    /// Makes `value` the one the last live instance restores: a value set
    /// deliberately while ttp measures (`check --fix`) outlasts the
    /// measurement instead of being undone by it. False when nothing is
    /// recorded (no instance will restore anything).
    pub fn keep_as_original(&self, value: &str) -> io::Result<bool> {
        let Some(_dir) = self.lock_dir(false)? else {
            return Ok(false);
        };
        let Some(change) = self.recorded()? else {
            return Ok(false);
        };
        let change = Change {
            original: value.into(),
            ..change
        };
        super::atomic::write_as_is(
            &self.state_path(),
            &serde_json::to_vec_pretty(&change).map_err(io::Error::other)?,
        )?;
        Ok(true)
    }

    pub(crate) fn forget(&self) -> io::Result<()> {
        match std::fs::remove_file(self.state_path()) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    pub(crate) fn current(&self) -> io::Result<String> {
        Ok(std::fs::read_to_string(&self.path)?.trim().to_string())
    }

    pub fn set(&self, value: &str) -> io::Result<()> {
        std::fs::write(&self.path, format!("{value}\n"))
    }

    /// The command that sets it to `value` by hand.
    pub(crate) fn by_hand(&self, value: &str) -> String {
        by_hand(self.setting, value)
    }

    /// With the directory locked and no live holder: puts back what a dead
    /// instance recorded, and forgets the record unless that failed.
    pub(crate) fn restore_abandoned(&self) -> Option<Leftover> {
        let change = match self.recorded() {
            Ok(Some(c)) => c,
            Ok(None) => return None,
            Err(e) => {
                log::warn!(
                    "{}: unreadable ({e}); removed. Check {} by hand",
                    self.state_path().display(),
                    self.setting
                );
                let _ = self.forget();
                return None;
            }
        };
        let found = self.current().unwrap_or_default();
        if found == change.original {
            // Killed between writing the record and changing the setting.
            let _ = self.forget();
            return None;
        }
        let outcome = if found != change.set_to {
            Outcome::ChangedSince
        } else {
            match self.set(&change.original) {
                Ok(()) => Outcome::Restored,
                Err(e) => Outcome::Failed {
                    error: e.to_string(),
                },
            }
        };
        if !matches!(outcome, Outcome::Failed { .. })
            && let Err(e) = self.forget()
        {
            log::warn!("cannot remove {}: {e}", self.state_path().display());
        }
        Some(Leftover {
            setting: change.setting,
            original: change.original,
            set_to: change.set_to,
            left_by_pid: change.pid,
            found,
            outcome,
        })
    }

    /// Restores what a dead instance left of this setting, unless a live
    /// instance holds it. Never creates anything.
    pub(crate) fn restore_leftover(&self) -> Option<Leftover> {
        let state = self.state_path();
        if !state.exists() {
            return None;
        }
        let failed = |error: String| {
            let change = self.recorded().ok().flatten()?;
            Some(Leftover {
                setting: change.setting,
                original: change.original,
                set_to: change.set_to,
                left_by_pid: change.pid,
                found: self.current().unwrap_or_default(),
                outcome: Outcome::Failed { error },
            })
        };
        let _dir = match self.lock_dir(false) {
            Ok(Some(d)) => d,
            Ok(None) => return None,
            Err(e) => return failed(format!("{}: {e}", self.dir.display())),
        };
        let holders = match self.open_lock(false) {
            Ok(f) => Some(f),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return failed(format!("{}: {e}", self.lock_path().display())),
        };
        let alone = holders
            .as_ref()
            .is_none_or(|h| flock(h, libc::LOCK_EX | libc::LOCK_NB));
        if !alone {
            return None;
        }
        let leftover = self.restore_abandoned();
        if let Some(h) = &holders {
            flock(h, libc::LOCK_UN);
        }
        leftover
    }
}

/// kernel.task_delayacct as a tracked setting of this machine (switched
/// on for a measurement by sys/delayacct.rs).
pub(crate) fn task_delayacct() -> Tracked {
    Tracked {
        id: "delayacct",
        setting: "kernel.task_delayacct",
        path: PathBuf::from("/proc/sys/kernel/task_delayacct"),
        dir: run_dir().to_path_buf(),
    }
}

/// Free page reporting's order (sys/page_reporting.rs), held at its
/// largest while `run` measures.
pub(crate) fn page_reporting_order() -> Tracked {
    Tracked {
        id: "page_reporting_order",
        setting: "page_reporting.page_reporting_order",
        path: PathBuf::from("/sys/module/page_reporting/parameters/page_reporting_order"),
        dir: run_dir().to_path_buf(),
    }
}

/// Every setting ttp may change, as it is on this machine.
pub fn tracked() -> Vec<Tracked> {
    vec![task_delayacct(), page_reporting_order()]
}

/// The command that sets `setting` to `value` by hand: a sysctl
/// (`kernel.x`) through sysctl(8), a module parameter (`module.param`)
/// through its file under /sys/module.
fn by_hand(setting: &str, value: &str) -> String {
    match setting.split_once('.') {
        Some((module, param)) if module != "kernel" => {
            format!("echo {value} > /sys/module/{module}/parameters/{param}")
        }
        _ => format!("sysctl -w {setting}={value}"),
    }
}

/// Restores what dead instances left (see the module documentation); what
/// was found and done, for the caller to show.
pub fn restore_leftovers() -> Vec<Leftover> {
    tracked()
        .iter()
        .filter_map(Tracked::restore_leftover)
        .collect()
}

/// Restores leftovers and says so on stderr, one line each (for commands
/// whose report has no place for them; `check` shows them in its own).
pub fn restore_leftovers_and_say() {
    for l in restore_leftovers() {
        log::warn!("{l}");
    }
}

/// The run directory's path.
pub(crate) fn run_dir() -> &'static Path {
    Path::new(RUN_DIR)
}
