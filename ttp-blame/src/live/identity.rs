//! Who a thread is, for the recording's `tasks`: its process's parent,
//! cgroup, systemd unit, user and whether it is a kernel thread, read from
//! /proc once per process; block device names from /sys. Readers take their
//! root directory so tests run on constructed trees.
use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use ttp_common::detail::{dev_major, dev_minor};

/// PF_KTHREAD in /proc/PID/stat's flags (include/linux/sched.h).
const PF_KTHREAD: u32 = 0x0020_0000;
/// kthreadd: the parent of every kernel thread.
const KTHREADD_PID: u32 = 2;

/// What /proc says about one process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ProcInfo {
    pub ppid: Option<u32>,
    pub kernel_thread: bool,
    pub cgroup: Option<String>,
    pub unit: Option<String>,
    pub uid: Option<u32>,
    pub user: Option<String>,
}

/// Process identities, read once per process from `proc_root`.
#[derive(Debug)]
pub(crate) struct Procs {
    proc_root: PathBuf,
    users: HashMap<u32, String>,
    cache: HashMap<u32, ProcInfo>,
}

impl Procs {
    /// `proc_root` is normally `/proc`; user names come from `passwd`
    /// (normally `/etc/passwd`; a missing file leaves names out).
    pub fn new(proc_root: &Path, passwd: &Path) -> Self {
        Self {
            proc_root: proc_root.to_path_buf(),
            users: std::fs::read_to_string(passwd)
                .map(|t| parse_passwd(&t))
                .unwrap_or_default(),
            cache: HashMap::new(),
        }
    }

    /// The identity of process `tgid`, read now if it has not been. A
    /// process already gone gets what the caller knows (`parent_hint`, the
    /// parent the ledger saw at fork); a kernel thread is also recognised
    /// by its parent, kthreadd.
    pub(crate) fn get(&mut self, tgid: u32, parent_hint: Option<u32>) -> &ProcInfo {
        let root = &self.proc_root;
        let users = &self.users;
        self.cache.entry(tgid).or_insert_with(|| {
            let mut info = read_proc(root, tgid, users);
            if info.ppid.is_none() {
                info.ppid = parent_hint;
            }
            if tgid == KTHREADD_PID || info.ppid == Some(KTHREADD_PID) {
                info.kernel_thread = true;
            }
            info
        })
    }

    /// Drops what is known of `tgid` (a new process reuses the pid).
    pub(crate) fn forget(&mut self, tgid: u32) {
        self.cache.remove(&tgid);
    }

    /// The CPU the kernel has thread `tid` of process `tgid` on — the one it
    /// runs on, or whose run queue holds it (/proc/PID/task/TID/stat field
    /// 39, task_cpu()).
    pub(crate) fn task_cpu(&self, tgid: u32, tid: u32) -> Option<u32> {
        let path = self
            .proc_root
            .join(tgid.to_string())
            .join("task")
            .join(tid.to_string())
            .join("stat");
        let text = std::fs::read_to_string(path).ok()?;
        // Field 39 is the 37th after the command name (fields 3, 4, …).
        stat_fields(&text)?.get(36)?.parse().ok()
    }

    /// Whether process `tgid` exists and is not a zombie.
    pub(crate) fn alive(&self, tgid: u32) -> bool {
        match std::fs::read_to_string(self.proc_root.join(tgid.to_string()).join("stat")) {
            Ok(text) => stat_fields(&text).is_some_and(|f| !matches!(f[0], "Z" | "X" | "x")),
            Err(_) => false,
        }
    }
}

fn read_proc(root: &Path, tgid: u32, users: &HashMap<u32, String>) -> ProcInfo {
    let dir = root.join(tgid.to_string());
    let mut info = ProcInfo::default();
    if let Ok(text) = std::fs::read_to_string(dir.join("stat"))
        && let Some(f) = stat_fields(&text)
    {
        info.ppid = f.get(1).and_then(|v| v.parse().ok());
        info.kernel_thread = f
            .get(6)
            .and_then(|v| v.parse::<u32>().ok())
            .is_some_and(|flags| flags & PF_KTHREAD != 0);
    }
    if let Ok(text) = std::fs::read_to_string(dir.join("cgroup")) {
        info.cgroup = cgroup_v2_path(&text);
        info.unit = info.cgroup.as_deref().and_then(systemd_unit);
    }
    if let Ok(text) = std::fs::read_to_string(dir.join("status")) {
        info.uid = text
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok());
        info.user = info.uid.and_then(|u| users.get(&u).cloned());
    }
    info
}

/// The fields of /proc/PID/stat after the command name, which may itself
/// contain spaces and parentheses (`((sd-pam))`): [0] is the state, [1] the
/// ppid, [6] the flags (proc(5) fields 3, 4 and 9).
fn stat_fields(text: &str) -> Option<Vec<&str>> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    (f.len() >= 7).then_some(f)
}

/// The unified-hierarchy path in /proc/PID/cgroup (`0::/path`).
pub(crate) fn cgroup_v2_path(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string)
        .filter(|p| !p.is_empty())
}

/// The systemd unit a cgroup path belongs to: its innermost `.service` or
/// `.scope` component (`/user.slice/user-1000.slice/session-3.scope` →
/// `session-3.scope`).
pub(crate) fn systemd_unit(path: &str) -> Option<String> {
    path.rsplit('/')
        .find(|c| c.ends_with(".service") || c.ends_with(".scope"))
        .map(str::to_string)
}

fn parse_passwd(text: &str) -> HashMap<u32, String> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let uid = f.nth(1)?.parse().ok()?;
            Some((uid, name.to_string()))
        })
        .collect()
}

/// Block device names by kernel dev_t, from `sys_root`/dev/block/MAJ:MIN
/// (normally /sys), cached.
#[derive(Debug)]
pub(crate) struct DeviceNames {
    sys_root: PathBuf,
    cache: HashMap<u32, String>,
}

impl DeviceNames {
    pub fn new(sys_root: &Path) -> Self {
        Self {
            sys_root: sys_root.to_path_buf(),
            cache: HashMap::new(),
        }
    }

    /// `vda` for 254:0; `MAJ:MIN` when /sys does not name it.
    pub fn name(&mut self, dev: u32) -> &str {
        let root = &self.sys_root;
        self.cache.entry(dev).or_insert_with(|| {
            let id = format!("{}:{}", dev_major(dev), dev_minor(dev));
            std::fs::read_link(root.join("dev/block").join(&id))
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or(id)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(name: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("ttp-ident-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        root
    }

    /// Catches a stat parser split by a command name with spaces and
    /// parentheses, a kernel thread missed, a unit taken from the wrong
    /// cgroup component, and a uid without its name.
    #[test]
    fn process_identity_from_a_proc_tree() {
        let root = tree("proc");
        let p = root.join("812");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(
            p.join("stat"),
            "812 ((sd pam)) S 77 812 812 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 1234 0 0",
        )
        .unwrap();
        std::fs::write(
            p.join("cgroup"),
            "0::/user.slice/user-1000.slice/session-3.scope\n",
        )
        .unwrap();
        std::fs::write(
            p.join("status"),
            "Name:\tsd\nUid:\t1000\t1000\t1000\t1000\n",
        )
        .unwrap();
        let k = root.join("97");
        std::fs::create_dir_all(&k).unwrap();
        // flags 0x00208040: PF_KTHREAD set.
        std::fs::write(
            k.join("stat"),
            "97 (kworker/u4:1-events) I 2 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 9 0 0",
        )
        .unwrap();
        let passwd = root.join("passwd");
        std::fs::write(
            &passwd,
            "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/a:/bin/sh\n",
        )
        .unwrap();
        let mut procs = Procs::new(&root, &passwd);
        let info = procs.get(812, None).clone();
        assert_eq!(info.ppid, Some(77));
        assert!(!info.kernel_thread);
        assert_eq!(info.unit.as_deref(), Some("session-3.scope"));
        assert_eq!(
            info.cgroup.as_deref(),
            Some("/user.slice/user-1000.slice/session-3.scope")
        );
        assert_eq!(
            (info.uid, info.user.as_deref()),
            (Some(1000), Some("alice"))
        );
        assert!(procs.get(97, None).kernel_thread);
        assert!(procs.alive(97));
        assert!(procs.alive(812));
        // Gone from /proc: the ledger's parent is used; kthreadd's child is a
        // kernel thread.
        let gone = procs.get(4242, Some(2)).clone();
        assert_eq!(gone.ppid, Some(2));
        assert!(gone.kernel_thread);
        assert!(!procs.alive(4242));
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// Catches a zombie counted as alive: its threads are gone.
    #[test]
    fn zombie_is_not_alive() {
        let root = tree("zombie");
        std::fs::create_dir_all(root.join("5")).unwrap();
        std::fs::write(root.join("5/stat"), "5 (x) Z 1 5 5 0 -1 4194308 0 0 0 0").unwrap();
        let procs = Procs::new(&root, &root.join("none"));
        assert!(!procs.alive(5));
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// Catches a device named by its partition or left unnamed: /sys links
    /// MAJ:MIN to the device directory; an unknown one keeps its numbers.
    #[test]
    fn device_names_from_sys() {
        let root = tree("sys");
        std::fs::create_dir_all(root.join("dev/block")).unwrap();
        std::os::unix::fs::symlink(
            "../../devices/pci0000:00/virtio1/block/vda",
            root.join("dev/block/254:0"),
        )
        .unwrap();
        let mut names = DeviceNames::new(&root);
        assert_eq!(names.name(254 << 20), "vda");
        assert_eq!(names.name((8 << 20) | 16), "8:16");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
