//! Who a process belongs to, as /proc says now: its control group, the
//! systemd unit that group stands for, and its user. `serve` groups the
//! ledger's accounts by these (ttp-serve, serve/fleet.rs).
//!
//! Like every reader here it takes the root of the tree it reads, so tests
//! run on constructed trees.
use std::{collections::HashMap, path::Path};

/// The unit types whose control group is the unit itself
/// (systemd.unit(5)); slices only group other units.
const UNIT_SUFFIXES: &[&str] = &[".service", ".scope", ".socket", ".mount", ".swap"];

/// The process's control-group path in the unified (v2) hierarchy, or, on
/// a machine with only v1 hierarchies, in systemd's named hierarchy, or
/// else in the first one listed. `None` when the process is gone.
pub fn cgroup_path(proc_root: &Path, tgid: u32) -> Option<String> {
    let text = std::fs::read_to_string(proc_root.join(tgid.to_string()).join("cgroup")).ok()?;
    cgroup_path_of(&text)
}

/// [`cgroup_path`] on the text of /proc/PID/cgroup (`id:controllers:path`
/// lines, cgroups(7)).
pub(crate) fn cgroup_path_of(text: &str) -> Option<String> {
    let lines: Vec<(&str, &str, &str)> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ':');
            Some((f.next()?, f.next()?, f.next()?))
        })
        .collect();
    let pick = lines
        .iter()
        .find(|(id, ctl, _)| *id == "0" && ctl.is_empty())
        .or_else(|| lines.iter().find(|(_, ctl, _)| *ctl == "name=systemd"))
        .or_else(|| lines.first())?;
    Some(pick.2.to_string())
}

/// The systemd unit a control-group path stands for: its innermost
/// component that names a unit with a control group of its own (a
/// service, scope, socket, mount or swap: a service's sub-groups belong to
/// the service), else its innermost slice, else the path itself (a machine
/// or container without systemd: the group is its own name).
pub fn unit_of(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    if let Some(u) = parts
        .iter()
        .rev()
        .find(|p| UNIT_SUFFIXES.iter().any(|s| p.ends_with(s)))
    {
        return (*u).to_string();
    }
    if let Some(s) = parts.iter().rev().find(|p| p.ends_with(".slice")) {
        return (*s).to_string();
    }
    if parts.is_empty() {
        "/".into()
    } else {
        path.to_string()
    }
}

/// The process's effective uid (/proc/PID/status `Uid:`, second field).
pub fn effective_uid(proc_root: &Path, tgid: u32) -> Option<u32> {
    let text = std::fs::read_to_string(proc_root.join(tgid.to_string()).join("status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// User names by uid from a passwd(5) file, read once; a uid it does not
/// list is shown as its number.
#[derive(Debug, Default, Clone)]
pub struct UserNames(HashMap<u32, String>);

impl UserNames {
    pub fn read(passwd: &Path) -> Self {
        let text = std::fs::read_to_string(passwd).unwrap_or_default();
        Self::parse(&text)
    }

    pub(crate) fn parse(text: &str) -> Self {
        Self(
            text.lines()
                .filter_map(|l| {
                    let f: Vec<&str> = l.split(':').collect();
                    Some((f.get(2)?.parse().ok()?, f.first()?.to_string()))
                })
                .collect(),
        )
    }

    pub fn name(&self, uid: u32) -> String {
        self.0.get(&uid).cloned().unwrap_or_else(|| uid.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a unified-hierarchy line ignored on a hybrid machine (this
    /// one: v1 controllers plus `0::/`), and the v1 fallbacks.
    #[test]
    fn picks_the_unified_hierarchy_then_systemd_then_the_first() {
        let hybrid = "9:name=systemd:/user.slice\n4:memory:/x/y\n0::/system.slice/a.service\n";
        assert_eq!(
            cgroup_path_of(hybrid).as_deref(),
            Some("/system.slice/a.service")
        );
        let v1 = "4:memory:/x\n9:name=systemd:/system.slice/b.service\n";
        assert_eq!(
            cgroup_path_of(v1).as_deref(),
            Some("/system.slice/b.service")
        );
        assert_eq!(cgroup_path_of("4:memory:/x\n").as_deref(), Some("/x"));
        assert_eq!(cgroup_path_of(""), None);
    }

    /// Catches a service's sub-group or a session's scope named by the
    /// wrong component.
    #[test]
    fn unit_is_the_innermost_unit_component() {
        assert_eq!(unit_of("/system.slice/nginx.service"), "nginx.service");
        assert_eq!(
            unit_of("/system.slice/postgresql@15-main.service/sub/x"),
            "postgresql@15-main.service"
        );
        assert_eq!(
            unit_of("/user.slice/user-1000.slice/session-3.scope"),
            "session-3.scope"
        );
        assert_eq!(unit_of("/user.slice/user-1000.slice"), "user-1000.slice");
        assert_eq!(unit_of("/"), "/");
        assert_eq!(unit_of("/ttp-test/a"), "/ttp-test/a");
    }

    #[test]
    fn user_names_from_passwd() {
        let u =
            UserNames::parse("root:x:0:0:root:/root:/bin/bash\npostgres:x:104:111::/x:/bin/sh\n");
        assert_eq!(u.name(0), "root");
        assert_eq!(u.name(104), "postgres");
        assert_eq!(u.name(4242), "4242");
    }

    #[test]
    fn effective_uid_from_status() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("7")).unwrap();
        std::fs::write(
            dir.path().join("7/status"),
            "Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t1\t1\t1\t1\n",
        )
        .unwrap();
        assert_eq!(effective_uid(dir.path(), 7), Some(0));
        assert_eq!(effective_uid(dir.path(), 8), None);
    }
}
