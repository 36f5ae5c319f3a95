use super::*;
use std::process::Command;

const SOURCE: &str = "static __attribute__((noinline)) int hidden_work(int x) { return x * 3 + 1; }\n\
                      int exported_root(int x) { return hidden_work(x) + 2; }\n\
                      int main(int argc, char **argv) { (void)argv; return exported_root(argc) & 1; }\n";

fn run(cmd: &mut Command) {
    let status = cmd.status().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(status.success(), "{cmd:?} failed");
}

/// A program built with `-g` whose debug information is split off as a
/// distribution does: `prog` stripped, with a debug link to `prog.debug`.
fn split_program(dir: &Path) -> (PathBuf, PathBuf) {
    let src = dir.join("prog.c");
    std::fs::write(&src, SOURCE).unwrap();
    let bin = dir.join("prog");
    let debug = dir.join("prog.debug");
    run(Command::new("cc")
        .args(["-g", "-O1", "-rdynamic", "-o"])
        .arg(&bin)
        .arg(&src));
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&bin)
        .arg(&debug));
    run(Command::new("strip")
        .args(["--strip-debug", "--strip-unneeded"])
        .arg(&bin));
    run(Command::new("objcopy")
        .arg(format!("--add-gnu-debuglink={}", debug.display()))
        .arg(&bin));
    (bin, debug)
}

/// The same program built once more with another constant: another
/// build-id, no debug link.
fn other_build(dir: &Path, factor: &str) -> PathBuf {
    let src = dir.join("prog.c");
    std::fs::write(&src, SOURCE.replace("x * 3", &format!("x * {factor}"))).unwrap();
    let b = dir.join("prog");
    run(Command::new("cc")
        .args(["-g", "-O1", "-o"])
        .arg(&b)
        .arg(&src));
    b
}

fn ids_of(bin: &Path) -> DebugIds {
    let data = std::fs::read(bin).unwrap();
    DebugIds::of(&object::File::parse(&*data).unwrap())
}

fn names_static(f: &DebugFile) -> bool {
    let file = object::File::parse(&*f.data).unwrap();
    defined_address(&file, "hidden_work", Some(SymbolKind::Text)).is_some()
}

/// Catches each place of the search order missed: the debug link next to
/// the binary, the build-id path under a debug directory (which wins over
/// the link), and the link under a debug directory followed by the
/// binary's own directory.
#[test]
fn finds_the_debug_file_by_link_and_by_build_id() {
    let dir = tempfile::tempdir().unwrap();
    let (bin, debug) = split_program(dir.path());
    let ids = ids_of(&bin);
    let hex = ids.build_id_hex().expect("cc gives a build-id");
    assert_eq!(ids.debuglink.as_ref().unwrap().0, "prog.debug");

    let by_link = find_debug_file(&bin, &ids, &DebugSearch::none()).expect("next to it");
    assert_eq!(by_link.source, SymbolSource::DebugLink);
    assert_eq!(by_link.path, debug);
    assert!(names_static(&by_link));

    let root = tempfile::tempdir().unwrap();
    let id_dir = root.path().join(".build-id").join(&hex[..2]);
    std::fs::create_dir_all(&id_dir).unwrap();
    let id_path = id_dir.join(format!("{}.debug", &hex[2..]));
    std::fs::copy(&debug, &id_path).unwrap();
    let search = DebugSearch {
        dirs: vec![root.path().to_owned()],
        debuginfod: Vec::new(),
        cache: None,
    };
    let by_id = find_debug_file(&bin, &ids, &search).expect("by build-id");
    assert_eq!(by_id.source, SymbolSource::BuildId);
    assert_eq!(by_id.path, id_path);

    // Only under DIR/<the binary's directory>/NAME.
    std::fs::remove_file(&id_path).unwrap();
    let real_dir = std::fs::canonicalize(dir.path()).unwrap();
    let mirrored = root.path().join(real_dir.strip_prefix("/").unwrap());
    std::fs::create_dir_all(&mirrored).unwrap();
    std::fs::rename(&debug, mirrored.join("prog.debug")).unwrap();
    let under = find_debug_file(&bin, &ids, &search).expect("under the debug dir");
    assert_eq!(under.source, SymbolSource::DebugLink);
    assert_eq!(under.path, mirrored.join("prog.debug"));
}

/// Catches a stale debug file accepted: one whose CRC is not the link's,
/// and one of another build (same name, other build-id).
#[test]
fn refuses_another_builds_debug_file() {
    let dir = tempfile::tempdir().unwrap();
    let (bin, debug) = split_program(dir.path());
    let ids = ids_of(&bin);
    let mut bytes = std::fs::read(&debug).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&debug, &bytes).unwrap();
    assert!(find_debug_file(&bin, &ids, &DebugSearch::none()).is_none());

    let other = tempfile::tempdir().unwrap();
    let other_debug = {
        let b = other_build(other.path(), "5");
        let d = other.path().join("prog.debug");
        run(Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&b)
            .arg(&d));
        d
    };
    let mut wrong = ids.clone();
    wrong.debuglink = None;
    let hex = wrong.build_id_hex().unwrap();
    let root = tempfile::tempdir().unwrap();
    let id_dir = root.path().join(".build-id").join(&hex[..2]);
    std::fs::create_dir_all(&id_dir).unwrap();
    std::fs::copy(&other_debug, id_dir.join(format!("{}.debug", &hex[2..]))).unwrap();
    let search = DebugSearch {
        dirs: vec![root.path().to_owned()],
        debuginfod: Vec::new(),
        cache: None,
    };
    assert!(find_debug_file(&bin, &wrong, &search).is_none());
}

/// On this machine's C library, whose debug file Debian's libc6-dbg
/// installs under /usr/lib/debug/.build-id: a function libc keeps static
/// (`_int_malloc`) is named through it, and its `.dynsym` does not name it.
/// Catches the system's debug directory not searched, or searched under
/// the wrong path for a real distribution's layout.
#[test]
fn names_the_c_librarys_static_functions_from_the_system_debug_file() {
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    let Ok(data) = std::fs::read(libc) else {
        eprintln!("no {}: skipped", libc.display());
        return;
    };
    let file = object::File::parse(&*data).unwrap();
    assert!(defined_address(&file, "_int_malloc", Some(SymbolKind::Text)).is_none());
    let ids = DebugIds::of(&file);
    let system = DebugSearch {
        dirs: vec![PathBuf::from(SYSTEM_DEBUG_DIR)],
        debuginfod: Vec::new(),
        cache: None,
    };
    let Some(debug) = find_debug_file(libc, &ids, &system) else {
        // `cargo xtask setup` installs it: under CI its absence is a failure.
        assert!(
            std::env::var_os("CI").is_none(),
            "no debug file of libc under {SYSTEM_DEBUG_DIR}: run `cargo xtask setup` (it installs libc6-dbg)"
        );
        eprintln!(
            "no debug file of libc under {SYSTEM_DEBUG_DIR} (apt-get install libc6-dbg): skipped"
        );
        return;
    };
    assert_eq!(
        debug.source,
        SymbolSource::BuildId,
        "{}",
        debug.path.display()
    );
    assert!(
        defined_address(
            &object::File::parse(&*debug.data).unwrap(),
            "_int_malloc",
            Some(SymbolKind::Text)
        )
        .is_some()
    );
}

/// The debug file from a debuginfod server (one on loopback serving the
/// split program's debug file under its build-id), cached, and accepted
/// only for the binary it belongs to. Catches the server not asked when
/// the debug directories have nothing, or a file sent for another
/// build-id used.
#[test]
fn fetches_the_debug_file_from_debuginfod() {
    let dir = tempfile::tempdir().unwrap();
    let (bin, debug) = split_program(dir.path());
    let mut ids = ids_of(&bin);
    ids.debuglink = None;
    let hex = ids.build_id_hex().unwrap();
    let (url, _) = debuginfod::test_server::serve(
        format!("/buildid/{hex}/debuginfo"),
        std::fs::read(&debug).unwrap(),
    );
    let cache = tempfile::tempdir().unwrap();
    let nothing = tempfile::tempdir().unwrap();
    let search = DebugSearch {
        dirs: vec![nothing.path().to_owned()],
        debuginfod: vec![url],
        cache: Some(cache.path().to_owned()),
    };
    let got = find_debug_file(&bin, &ids, &search).expect("from the server");
    assert_eq!(got.source, SymbolSource::Debuginfod);
    assert_eq!(got.path, cache.path().join(&hex).join("debuginfo"));
    assert!(names_static(&got));

    // The server sends that file for another binary's build-id: refused.
    let other = tempfile::tempdir().unwrap();
    let other_bin = other_build(other.path(), "7");
    let mut other_ids = ids_of(&other_bin);
    other_ids.debuglink = None;
    let other_hex = other_ids.build_id_hex().unwrap();
    std::fs::create_dir_all(cache.path().join(&other_hex)).unwrap();
    std::fs::copy(&debug, cache.path().join(&other_hex).join("debuginfo")).unwrap();
    assert!(find_debug_file(&other_bin, &other_ids, &search).is_none());
    assert!(
        !cache.path().join(&other_hex).join("debuginfo").exists(),
        "the wrong file stays cached"
    );
}
