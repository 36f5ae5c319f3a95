//! `vprofile --pid` of a process in a mount namespace of its own, as a
//! server in a container runs (root; see common::root_or_skip).
use crate::common;

use std::{process::Command, time::Duration};

use super::vprofile::{Kill, build_target};
use common::*;

/// `vprofile --pid` without `--binary` on a process whose executable
/// exists only in its own mount namespace, as a server in a container's
/// does: the fixture copied onto a tmpfs mounted in a private namespace
/// (`unshare --mount`) over a directory that stays empty on ttp's side.
/// `/proc/PID/exe` reads a path that names nothing here; ttp must take it
/// through `/proc/PID/root`, profile the process, and say which file it
/// read. Catches the default binary resolved in ttp's own namespace (it
/// refuses: no such file; or reads another file at the same path).
#[test]
fn default_binary_of_a_process_in_another_mount_namespace() {
    if !root_or_skip("default_binary_of_a_process_in_another_mount_namespace") {
        return;
    }
    let _serial = serial();
    let (dir, bin) = build_target();
    let hidden = dir.0.join("hidden");
    std::fs::create_dir_all(&hidden).unwrap();
    let inside = hidden.join("vprof-target");
    let script = format!(
        "mount -t tmpfs tmpfs {h} && cp {b} {i} && exec {i} deep 0 -",
        h = hidden.display(),
        b = bin.display(),
        i = inside.display()
    );
    let child = Kill(
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .spawn()
            .expect("unshare"),
    );
    let pid = child.0.id();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .as_deref()
        != Some(&inside)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the fixture did not start in its namespace"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !inside.exists(),
        "the fixture is visible outside its namespace"
    );
    let json = dir.0.join("ns.json");
    let (code, text, err) = ttp(&[
        "vprofile",
        "--pid",
        &pid.to_string(),
        "--root",
        "vt_root_deep",
        "--invocations",
        "20",
        "--rounds",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}\n{text}");
    let doc = json_file(&json);
    let through_root = format!(
        "/proc/{pid}/root/{}",
        inside.display().to_string().trim_start_matches('/')
    );
    assert_eq!(doc["binary"]["path"], through_root.as_str());
    assert!(doc["invocations"].as_u64().is_some_and(|n| n > 0), "{text}");
    drop(child);
}
