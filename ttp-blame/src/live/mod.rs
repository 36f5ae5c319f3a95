//! The live window source: the kernel ledger with the blame detail (a
//! `MeasurementSession::open_blame`), read every δt — iQCAR's heartbeat interval
//! (Sec. 5.3) — for one victim process.
//!
//! Each edge reads the ledger (thread accounts, per-CPU idle), then the
//! detail maps, then the exit records; [`edge::to_window`] turns two edges
//! into one recorded window. Between edges the exit records are polled, so
//! the window in which the victim exits ends at its exit (within
//! [`EXIT_POLL`]) rather than at the next edge.
mod edge;
mod identity;

#[cfg(test)]
mod tests;

use std::{
    collections::{BTreeSet, HashMap},
    path::Path,
    time::Duration,
};

use ttp_common::{ExitRecord, ThreadAccount};

use self::{
    edge::{Edge, Naming},
    identity::{DeviceNames, Procs},
};
use super::{
    input::{Sources, TaskInfo, VictimSpec, Window},
    source::{SourceError, WindowSource, check_victim},
};
use ttp_ledger::{
    accounts::{ThreadKey, comm},
    probe::{DetailStats, KernelStats, ThreadDetailKeys},
};
use ttp_sys::sys::clock::monotonic_ns;
use ttp_window::window::session::MeasurementSession;

/// How often exit records are polled between edges.
pub(crate) const EXIT_POLL: Duration = Duration::from_millis(5);

/// Polls to wait for the victim's exit records once it is gone (200 ms).
const EXIT_WAIT_POLLS: u32 = 40;

/// Windows of the live ledger for one victim.
pub(crate) struct LiveSource {
    session: MeasurementSession,
    window_ns: u64,
    victim: VictimSpec,
    sources: Sources,
    /// The last edge: the start of the next window.
    prev: Edge,
    /// The first edge: threads started after it have a `start_ns`.
    first_ns: u64,
    next_edge_ns: u64,
    tasks: Vec<TaskInfo>,
    ids: HashMap<ThreadKey, u32>,
    procs: Procs,
    devices: DeviceNames,
    last_device: HashMap<u32, u32>,
    /// Exit records not yet assigned to a window.
    pending_exits: Vec<ExitRecord>,
    /// Threads that exited in the last window: their detail entries are
    /// forgotten at the next edge.
    exited_last: Vec<ThreadDetailKeys>,
    lost_at_start: (KernelStats, DetailStats),
    lost_reported: u64,
    done: bool,
}

impl LiveSource {
    /// Takes the first edge of the session's ledger, which carries the
    /// blame detail ([`MeasurementSession::open_blame`]: privileges checked,
    /// a dead instance's leftovers restored, the ledger seeded).
    pub(crate) fn open(
        session: MeasurementSession,
        victim: &VictimSpec,
        window_ns: u64,
    ) -> Result<Self, SourceError> {
        check_victim(Path::new("/proc"), victim.pid)?;
        let avail = session
            .ledger
            .detail_availability()
            .cloned()
            .unwrap_or_default();
        for note in &avail.notes {
            log::warn!("{note}");
        }
        let sources = Sources {
            cpu_time: true,
            runq_wait: true,
            iowait: true,
            disk_io: avail.disk_devices,
            mem_stall: avail.direct_reclaim,
            // mm_page_alloc fires on every page allocation: too hot a path
            // for an always-on program, so consumption of memory is not
            // measured and memory stalls are blamed on unknown causes.
            mem_alloc: false,
            // The ledger's own-I/O clock: while a thread waits, the time
            // the device serves its process's requests.
            iowait_own: avail.disk_devices,
        };
        let mut src = Self {
            session,
            window_ns,
            victim: victim.clone(),
            sources,
            prev: Edge::default(),
            first_ns: 0,
            next_edge_ns: 0,
            tasks: Vec::new(),
            ids: HashMap::new(),
            procs: Procs::new(Path::new("/proc"), Path::new("/etc/passwd")),
            devices: DeviceNames::new(Path::new("/sys")),
            last_device: HashMap::new(),
            pending_exits: Vec::new(),
            exited_last: Vec::new(),
            lost_at_start: Default::default(),
            lost_reported: 0,
            done: false,
        };
        // A first read registers every thread already running (reading
        // /proc for each process takes a while); the first edge follows it.
        src.sample()?;
        let (first, stats) = src.sample()?;
        src.lost_at_start = stats;
        src.first_ns = first.at_ns;
        src.next_edge_ns = first.at_ns + window_ns;
        src.prev = first;
        if !src.victim_alive() {
            return Err(SourceError::NoSuchProcess { pid: victim.pid });
        }
        Ok(src)
    }

    /// Reads one edge: ledger, then detail, then the CPUs, then the exit
    /// records (a thread missing from the ledger's map has sent its record by
    /// then). Records of exits after the edge wait for the next one.
    fn sample(&mut self) -> Result<(Edge, (KernelStats, DetailStats)), SourceError> {
        let read_start = monotonic_ns();
        let mut snap = self.session.ledger.snapshot()?;
        let detail = self.session.ledger.detail_snapshot()?.unwrap_or_default();
        // The CPUs' idle state read right after the (thread, CPU) pairs, and
        // one instant closing every open interval: a switch between two reads
        // then shifts at most that gap between the thread and the idle task.
        snap.cpus = self.session.ledger.cpu_accounts()?;
        snap.at_ns = monotonic_ns();
        self.session.ledger.drain_exits(&mut self.pending_exits);
        let (exited, later): (Vec<ExitRecord>, Vec<ExitRecord>) = self
            .pending_exits
            .drain(..)
            .partition(|e| e.exit_ns <= snap.at_ns);
        self.pending_exits = later;
        for a in &snap.threads {
            self.register(a, None);
        }
        for e in &exited {
            self.register(&e.account, Some(e.exit_ns));
        }
        let procs = &self.procs;
        let mut edge = Edge::build(&snap, &detail, &exited, &mut |tgid, tid| {
            procs.task_cpu(tgid, tid)
        });
        edge.hold_max(&self.prev);
        edge.read_ns = snap.at_ns.saturating_sub(read_start);
        // Detail entries of threads that exited one window ago have been
        // read for the last time.
        let gone = std::mem::take(&mut self.exited_last);
        self.session.ledger.forget_detail(&gone);
        self.exited_last = exited
            .iter()
            .filter_map(|e| {
                let t = edge.threads.get(&ThreadKey::of(&e.account))?;
                Some(ThreadDetailKeys {
                    tid: e.account.tid,
                    cpus: t.on_cpu.closed.keys().copied().collect(),
                    devs: t.disk.keys().copied().collect(),
                })
            })
            .collect();
        Ok((edge, (snap.stats, detail.stats)))
    }

    /// Gives a thread its task id and identity the first time it is seen;
    /// later, keeps its name (exec changes it) and its exit time.
    fn register(&mut self, a: &ThreadAccount, exit_ns: Option<u64>) {
        let key = ThreadKey::of(a);
        let name = comm(a);
        if let Some(&id) = self.ids.get(&key) {
            let t = &mut self.tasks[id as usize - 1];
            if !name.is_empty() {
                t.comm = name;
            }
            if exit_ns.is_some() {
                t.exit_ns = exit_ns;
            }
            return;
        }
        let leader = a.tid == a.tgid;
        if leader {
            // A new process under this pid: an earlier one's identity is stale.
            self.procs.forget(a.tgid);
        }
        let hint =
            (leader && a.parent_tgid != 0 && a.parent_tgid != a.tgid).then_some(a.parent_tgid);
        let info = self.procs.get(a.tgid, hint).clone();
        let id = self.tasks.len() as u32 + 1;
        self.tasks.push(TaskInfo {
            id,
            tid: a.tid,
            pid: a.tgid,
            ppid: info.ppid,
            comm: name,
            process_comm: None,
            cgroup: info.cgroup,
            unit: info.unit,
            uid: info.uid,
            user: info.user,
            kernel_thread: info.kernel_thread,
            // Seeded accounts carry /proc's start (ticks, far below any
            // monotonic edge): those threads started before the recording.
            start_ns: (a.start_time_ns > self.first_ns && self.first_ns > 0)
                .then_some(a.start_time_ns),
            exit_ns,
        });
        self.ids.insert(key, id);
    }

    /// The victim's processes: its pid and, with `children`, every process
    /// whose parent chain reaches it (as far as the tasks seen so far tell).
    fn victim_pids(&self) -> BTreeSet<u32> {
        self.victim.processes(&self.tasks)
    }

    /// Once the victim is gone from /proc's view (a zombie), waits briefly
    /// for the exit records of its threads (sent at their final switch-out,
    /// just after), so that the last window includes their exit.
    fn await_exit_records(&mut self) {
        let victim = self.victim_pids();
        let waiting = |pending: &[ExitRecord], tasks: &[TaskInfo]| {
            tasks.iter().any(|t| {
                victim.contains(&t.pid)
                    && t.exit_ns.is_none()
                    && !pending.iter().any(|e| e.account.tid == t.tid)
            })
        };
        for _ in 0..EXIT_WAIT_POLLS {
            self.session.ledger.drain_exits(&mut self.pending_exits);
            if !waiting(&self.pending_exits, &self.tasks) {
                return;
            }
            std::thread::sleep(EXIT_POLL);
        }
    }

    fn victim_alive(&self) -> bool {
        self.victim_pids().into_iter().any(|p| self.procs.alive(p))
    }

    /// Warns when the kernel side lost updates since the start.
    fn report_losses(&mut self, stats: (KernelStats, DetailStats)) {
        let ledger = stats.0.since(&self.lost_at_start.0).losses();
        let detail = stats
            .1
            .losses()
            .saturating_sub(self.lost_at_start.1.losses());
        if ledger + detail > self.lost_reported {
            log::warn!(
                "the kernel side lost {ledger} ledger and {detail} detail updates so far \
                 (full maps or failed reads): blame is computed on incomplete data"
            );
            self.lost_reported = ledger + detail;
        }
    }
}

impl WindowSource for LiveSource {
    fn window_ns(&self) -> u64 {
        self.window_ns
    }

    fn sources(&self) -> Sources {
        self.sources
    }

    fn next_window(&mut self) -> Result<Option<Window>, SourceError> {
        if self.done {
            return Ok(None);
        }
        let victim = self.victim_pids();
        loop {
            let now = monotonic_ns();
            if now >= self.next_edge_ns {
                break;
            }
            std::thread::sleep(Duration::from_nanos(
                (self.next_edge_ns - now).min(EXIT_POLL.as_nanos() as u64),
            ));
            let seen = self.pending_exits.len();
            self.session.ledger.drain_exits(&mut self.pending_exits);
            let victim_exit = self.pending_exits[seen..]
                .iter()
                .any(|e| victim.contains(&e.account.tgid));
            if victim_exit && !self.victim_alive() {
                break;
            }
        }
        if !self.victim_alive() {
            self.await_exit_records();
        }
        let (mut cur, stats) = self.sample()?;
        self.report_losses(stats);
        let Self {
            prev,
            ids,
            devices,
            last_device,
            ..
        } = self;
        let window = edge::to_window(
            prev,
            &mut cur,
            Naming {
                task_id: &mut |k| ids.get(k).copied().unwrap_or(0),
                device: &mut |d| devices.name(d).to_string(),
                last_device,
            },
        );
        self.prev = cur;
        // Edges stay on the δt grid, so one late edge does not shift the
        // others; an edge so late that the next would come within half a
        // window starts a new grid instead of making a sliver of a window.
        let now = monotonic_ns();
        self.next_edge_ns += self.window_ns;
        if self.next_edge_ns < now + self.window_ns / 2 {
            self.next_edge_ns = now + self.window_ns;
        }
        if !self.victim_alive() {
            self.done = true;
        }
        Ok(Some(window))
    }

    fn tasks(&self) -> Vec<TaskInfo> {
        // The process name is its main thread's (the last one seen under
        // that pid).
        let mut process_comm: HashMap<u32, &str> = HashMap::new();
        for t in self.tasks.iter().filter(|t| t.tid == t.pid) {
            process_comm.insert(t.pid, &t.comm);
        }
        // Threads that exited before the first edge were never alive during
        // the recording.
        self.tasks
            .iter()
            .filter(|t| t.exit_ns.is_none_or(|e| e > self.first_ns))
            .map(|t| {
                let mut t = t.clone();
                t.process_comm = process_comm
                    .get(&t.pid)
                    .filter(|c| **c != t.comm)
                    .map(|c| c.to_string());
                t
            })
            .collect()
    }
}

/// Opens the live source for `victim` on a session opened with the blame
/// detail ([`MeasurementSession::open_blame`]): its ledger read every
/// `window_ns` (docs/blame.md, "Live measurement").
pub fn open_live(
    session: MeasurementSession,
    victim: &VictimSpec,
    window_ns: u64,
) -> Result<Box<dyn WindowSource>, SourceError> {
    Ok(Box::new(LiveSource::open(session, victim, window_ns)?))
}
