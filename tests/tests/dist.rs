//! The Debian package (`cargo xtask dist`), installed on this machine
//! (root): `ttp-ebpf --help`, the man page of a subcommand and the bash
//! completion work from it, and it removes cleanly.
use crate::common;

use std::{path::PathBuf, process::Command};

use common::*;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Catches a package that does not install, lacks the binary, a
/// subcommand's man page or the completion, or leaves files behind.
#[test]
fn the_package_installs_works_and_removes() {
    if !root_or_skip("the_package_installs_works_and_removes") {
        return;
    }
    let _serial = serial();
    // An installed copy not from this test would be replaced, then removed.
    let before = Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", "ttp-ebpf"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("ok installed"))
        .unwrap_or(false);
    assert!(
        !before,
        "ttp-ebpf is already installed as a package: remove it first"
    );
    // The debug build the tests run with, so no release build is needed.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = run(Command::new(cargo)
        .current_dir(workspace())
        .args(["xtask", "dist", "--debug"]));
    let deb = out
        .lines()
        .find_map(|l| l.strip_prefix("xtask: built "))
        .map(PathBuf::from)
        .expect("the path of the package");
    run(Command::new("dpkg").arg("-i").arg(&deb));
    struct Remove;
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = Command::new("dpkg").args(["-r", "ttp-ebpf"]).output();
        }
    }
    let remove = Remove;
    let help = run(Command::new("/usr/bin/ttp-ebpf").arg("--help"));
    assert!(help.contains("serve"), "{help}");
    let man = run(Command::new("man")
        .args(["-P", "cat", "ttp-ebpf-run"])
        .env("MANWIDTH", "80"));
    assert!(man.contains("ttp-ebpf-run"), "{man}");
    let comp = "/usr/share/bash-completion/completions/ttp-ebpf";
    let words = run(Command::new("bash").args([
        "-c",
        &format!(
            "source {comp}; f=$(complete -p ttp-ebpf | sed 's/.*-F \\([^ ]*\\).*/\\1/'); COMP_WORDS=(ttp-ebpf se); COMP_CWORD=1; $f ttp-ebpf se ttp-ebpf; echo ${{COMPREPLY[@]}}"
        ),
    ]));
    assert!(
        words.split_whitespace().any(|w| w == "serve"),
        "completion: {words}"
    );
    let files = run(Command::new("dpkg").args(["-L", "ttp-ebpf"]));
    assert!(
        files.contains("/lib/systemd/system/ttp-serve.service"),
        "{files}"
    );
    drop(remove);
    let _ = std::fs::remove_file(&deb);
    for f in [
        "/usr/bin/ttp-ebpf",
        comp,
        "/usr/share/man/man1/ttp-ebpf-run.1.gz",
    ] {
        assert!(!std::path::Path::new(f).exists(), "{f} left after dpkg -r");
    }
}
