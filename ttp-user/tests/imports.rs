//! Imports inside a crate point one way: no two files of a crate import
//! each other, directly or around a ring (docs/architecture.md, "Modules").
//! A file imports another when it names a path into that file's module:
//! `crate::a::b`, `super::x`, `self::y`, or a child module by its name
//! (`child::f` in the file that declares `mod child;`). A parent's `mod`
//! declarations are not imports, and `#[cfg(test)]` code is left out (a
//! test of a type may use a helper that builds it). The test builds each
//! crate's module tree from its roots (lib.rs, main.rs, src/bin/),
//! following `mod` and `#[path]`, and fails on every ring, listing its
//! files and the paths that close it.
use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

use crate::common::module_graph::{describe, import_graph, read_crate, rings};

/// Every crate of the workspace whose files the test reads: the userspace
/// crates, the eBPF programs and their common layouts, xtask and the
/// privileged tests' crate.
const CRATES: &[&str] = &[
    "ttp-ebpf/common",
    "ttp-ebpf",
    "ttp-sys",
    "ttp-ledger",
    "ttp-window",
    "ttp-variance",
    "ttp-ttpv2",
    "ttp-emp",
    "ttp-vprofile",
    "ttp-statements",
    "ttp-blame",
    "ttp-load",
    "ttp-compare",
    "ttp-serve",
    "ttp-user",
    "xtask",
    "tests",
];

/// Rings that remain, each as the files it may span (relative to the
/// workspace). The list only shrinks: a ring that is not within one entry
/// fails the test, and an entry no ring lies within fails it too.
const KNOWN_RINGS: &[&[&str]] = &[
    // The loaded ledger: its struct (mod.rs) holds the maps of each
    // part, and each part adds its methods to it (`impl Ledger`).
    &[
        "ttp-ledger/src/probe/cost.rs",
        "ttp-ledger/src/probe/detail.rs",
        "ttp-ledger/src/probe/mod.rs",
        "ttp-ledger/src/probe/read.rs",
        "ttp-ledger/src/probe/statements.rs",
        "ttp-ledger/src/probe/trace.rs",
    ],
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Catches two files of a crate that import each other, directly or
/// around a ring.
#[test]
fn no_files_import_each_other() {
    let base = workspace();
    let read = |p: &Path| fs::read_to_string(p).ok();
    let mut found = Vec::new();
    let mut known_seen = vec![false; KNOWN_RINGS.len()];
    for c in CRATES {
        let src = base.join(c).join("src");
        let mut roots = vec![src.join("lib.rs"), src.join("main.rs")];
        if let Ok(bins) = fs::read_dir(src.join("bin")) {
            roots.extend(bins.map(|e| e.unwrap().path()));
        }
        for krate in read_crate(&roots, &read) {
            let graph = import_graph(&krate);
            for ring in rings(&graph) {
                let rel: Vec<String> = ring
                    .iter()
                    .map(|f| f.strip_prefix(&base).unwrap().display().to_string())
                    .collect();
                let within = KNOWN_RINGS
                    .iter()
                    .position(|k| rel.iter().all(|f| k.contains(&f.as_str())));
                match within {
                    Some(k) => known_seen[k] = true,
                    None => found.push(describe(&graph, &ring, &base)),
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "{} rings of files that import each other (move what both need into \
         the lower file, or a new file both import):\n{}",
        found.len(),
        found.join("")
    );
    let stale: Vec<_> = KNOWN_RINGS
        .iter()
        .zip(&known_seen)
        .filter(|(_, seen)| !**seen)
        .map(|(k, _)| k)
        .collect();
    assert!(
        stale.is_empty(),
        "no longer rings, remove from KNOWN_RINGS: {stale:?}"
    );
}

/// Catches a crate's file the test never reads (a `mod` it failed to
/// follow), which would hide that file's imports.
#[test]
fn every_file_is_reached() {
    let base = workspace();
    let read = |p: &Path| fs::read_to_string(p).ok();
    for c in CRATES {
        let src = base.join(c).join("src");
        let mut roots = vec![src.join("lib.rs"), src.join("main.rs")];
        if let Ok(bins) = fs::read_dir(src.join("bin")) {
            roots.extend(bins.map(|e| e.unwrap().path()));
        }
        let reached: BTreeSet<PathBuf> = read_crate(&roots, &read)
            .into_iter()
            .flat_map(|k| k.facts.into_keys())
            .collect();
        let mut files = Vec::new();
        crate::common::rust_files(&src, &mut files);
        let missed: Vec<_> = files.iter().filter(|f| !reached.contains(*f)).collect();
        assert!(missed.is_empty(), "{c}: files no root reaches: {missed:?}");
    }
}

fn in_memory(files: &[(&str, &str)]) -> impl Fn(&Path) -> Option<String> {
    let map: BTreeMap<PathBuf, String> = files
        .iter()
        .map(|(p, t)| (PathBuf::from(p), t.to_string()))
        .collect();
    move |p: &Path| map.get(p).cloned()
}

/// The checker fails on a constructed two-file ring, and on a parent and
/// child that import each other, and passes once the ring is broken.
#[test]
fn finds_a_constructed_ring() {
    let two = in_memory(&[
        ("src/lib.rs", "mod a;\nmod b;\n"),
        ("src/a.rs", "use crate::b::B;\npub struct A(B);\n"),
        ("src/b.rs", "pub struct B;\nfn f(_: super::a::A) {}\n"),
    ]);
    let krate = read_crate(&[PathBuf::from("src/lib.rs")], &two).remove(0);
    let graph = import_graph(&krate);
    assert_eq!(
        rings(&graph),
        [vec![PathBuf::from("src/a.rs"), PathBuf::from("src/b.rs")]]
    );
    let text = describe(&graph, &rings(&graph)[0], Path::new(""));
    assert!(
        text.contains("src/a.rs -> src/b.rs (use crate::b::B)"),
        "{text}"
    );
    assert!(
        text.contains("src/b.rs -> src/a.rs (super::a::A)"),
        "{text}"
    );

    let parent = in_memory(&[
        ("src/lib.rs", "mod w;\n"),
        (
            "src/w/mod.rs",
            "mod q;\npub struct Shared;\nfn g() { q::run() }\n",
        ),
        ("src/w/q.rs", "use super::{Shared, *};\npub fn run() {}\n"),
    ]);
    let krate = read_crate(&[PathBuf::from("src/lib.rs")], &parent).remove(0);
    assert_eq!(rings(&import_graph(&krate)).len(), 1);

    let broken = in_memory(&[
        ("src/lib.rs", "mod a;\nmod b;\n"),
        ("src/a.rs", "use crate::b::B;\npub struct A(B);\n"),
        (
            "src/b.rs",
            "pub struct B;\n// super::a::A\nconst S: &str = \"crate::a\";\n\
             #[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::a::A;\n}\n",
        ),
    ]);
    let krate = read_crate(&[PathBuf::from("src/lib.rs")], &broken).remove(0);
    assert!(rings(&import_graph(&krate)).is_empty());
}

/// `#[path]` declarations, groups and inline modules resolve to the files
/// they name; a `#[cfg(test)]` module's imports are left out.
#[test]
fn resolves_path_attributes_groups_and_inline_modules() {
    let files = in_memory(&[
        ("src/lib.rs", "pub mod w;\n"),
        (
            "src/w/mod.rs",
            "pub mod x;\npub mod y;\n#[path = \"z_tests.rs\"]\nmod z;\n\
             #[cfg(test)]\nmod t;\n",
        ),
        ("src/w/t.rs", "use crate::w::x::X;\n"),
        ("src/w/x.rs", "use crate::w::{y::{Y, self}, *};\n"),
        ("src/w/y.rs", "mod tests {\n    use super::super::x;\n}\n"),
        ("src/w/z_tests.rs", "use super::x::X;\n"),
    ]);
    let krate = read_crate(&[PathBuf::from("src/lib.rs")], &files).remove(0);
    let graph = import_graph(&krate);
    let edges = |f: &str| -> Vec<PathBuf> { graph[Path::new(f)].keys().cloned().collect() };
    assert_eq!(
        edges("src/w/x.rs"),
        [PathBuf::from("src/w/mod.rs"), PathBuf::from("src/w/y.rs")]
    );
    assert_eq!(edges("src/w/y.rs"), [PathBuf::from("src/w/x.rs")]);
    assert_eq!(edges("src/w/z_tests.rs"), [PathBuf::from("src/w/x.rs")]);
    assert!(edges("src/w/t.rs").is_empty(), "a test module's imports");
}
