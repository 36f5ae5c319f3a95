//! Threads that existed before the probes attached, as /proc lists them.
use super::SeedThread;

/// Every thread in /proc with its state letter. Threads that exit while
/// being listed are skipped.
pub fn threads_from_proc() -> Vec<SeedThread> {
    let mut out = Vec::new();
    let Ok(procs) = procfs::process::all_processes() else {
        return out;
    };
    for p in procs.flatten() {
        let tgid = p.pid as u32;
        let Ok(tasks) = p.tasks() else { continue };
        for t in tasks.flatten() {
            if let Ok(st) = t.stat() {
                out.push(SeedThread {
                    tid: t.tid as u32,
                    tgid,
                    ppid: st.ppid.max(0) as u32,
                    state: st.state,
                    comm: st.comm,
                    start_key: st.starttime,
                    sched: super::read::schedstat(t.tid as u32),
                });
            }
        }
    }
    out
}
