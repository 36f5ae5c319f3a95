//! Call-graph extraction checked against objdump's disassembly of the same
//! bytes (an independent decoder and symbolizer), on the vprof-target
//! fixture and on the system's libc.so.6.
use std::{path::Path, process::Command};

use super::{
    callgraph::{CallGraph, ChildKey},
    calls::Callee,
    elf::{ElfError, ElfImage, ElfKind},
    fixture::{self, Variant},
};
use ttp_ledger::probe::symbols::SymbolSource;

const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";

/// A `call` as objdump prints it: (address, direct target, symbol label).
type ObjdumpCall = (u64, Option<u64>, String);

/// objdump's calls in [start, end).
fn objdump_calls(binary: &Path, start: u64, end: u64) -> Vec<ObjdumpCall> {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "-M", "att"])
        .arg(format!("--start-address={start:#x}"))
        .arg(format!("--stop-address={end:#x}"))
        .arg(binary)
        .output()
        .expect("run objdump (binutils, installed with the C compiler)");
    assert!(
        out.status.success(),
        "objdump failed on {}",
        binary.display()
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut calls = Vec::new();
    for line in text.lines() {
        let Some((addr, rest)) = line.trim_start().split_once(":\t") else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        let rest = rest.trim();
        let Some(operand) = rest.strip_prefix("call").map(str::trim_start) else {
            continue;
        };
        if operand.starts_with('*') {
            calls.push((addr, None, String::new()));
            continue;
        }
        let (target, label) = operand.split_once(' ').unwrap_or((operand, ""));
        let target = u64::from_str_radix(target, 16).ok();
        let label = label.trim_matches(|c| c == '<' || c == '>').to_owned();
        calls.push((addr, target, label));
    }
    calls
}

/// Checks every call site of `function` against objdump: same addresses,
/// and each resolved target agrees with objdump's label.
fn assert_matches_objdump(elf: &ElfImage, binary: &Path, function: usize) {
    let f = &elf.functions()[function];
    let ours = super::calls::function_calls(elf, function);
    let theirs = objdump_calls(binary, f.address, f.address + f.size_bytes);
    let our_addrs: Vec<u64> = ours.call_sites.iter().map(|c| c.call_address).collect();
    let their_addrs: Vec<u64> = theirs.iter().map(|c| c.0).collect();
    assert_eq!(our_addrs, their_addrs, "call sites of {} differ", f.name);
    for (cs, (_, target, label)) in ours.call_sites.iter().zip(&theirs) {
        match &cs.callee {
            Callee::Local(i) => {
                let g = &elf.functions()[*i];
                if label.ends_with("@plt") {
                    // Through this file's own PLT: objdump names the stub.
                    let stub = label.trim_end_matches("@plt");
                    let base = stub.split('@').next().unwrap_or(stub);
                    assert!(
                        stub.starts_with("*ABS*")
                            || g.name == base
                            || g.aliases.iter().any(|a| a.starts_with(base)),
                        "{:#x}: we bound {} via the PLT, objdump says {label}",
                        cs.call_address,
                        g.name
                    );
                } else {
                    assert_eq!(
                        Some(g.address),
                        *target,
                        "{:#x}: {} vs objdump {label}",
                        cs.call_address,
                        g.name
                    );
                    assert!(!label.contains('+'), "objdump sees no symbol at {label}");
                }
            }
            Callee::Import { name } => {
                assert!(
                    label.starts_with(&format!("{name}@")),
                    "{:#x}: we say import {name}, objdump says {label}",
                    cs.call_address
                );
            }
            Callee::Unnamed { target: t } => {
                assert_eq!(Some(*t), *target);
                assert!(
                    label.contains('+') || label.is_empty(),
                    "{:#x}: objdump found a symbol ({label}) where we found none",
                    cs.call_address
                );
            }
            Callee::Indirect => assert!(target.is_none() || label.is_empty()),
        }
    }
}

/// The fixture's root calls exactly these functions (by its source), and
/// objdump agrees on every call site. Catches missed calls, PLT stubs left
/// unresolved, and children in the wrong order.
#[test]
fn fixture_root_children_match_source_and_objdump() {
    let bin = fixture::build(Variant::Pie);
    let elf = ElfImage::load(&bin).unwrap();
    assert_eq!(elf.kind(), ElfKind::PieExecutable);
    assert_eq!(elf.symbol_source(), SymbolSource::Symtab);
    let root = elf.lookup("vt_root").unwrap();
    assert_matches_objdump(&elf, &bin, root);
    let graph = CallGraph::build(&elf, root);
    let names: Vec<String> = graph.children(root).into_iter().map(|c| c.name).collect();
    assert_eq!(
        names,
        [
            "clock_gettime",
            "vt_jitter",
            "vt_scan",
            "vt_sum",
            "vt_steady"
        ]
    );
    let clock = &graph.children(root)[0];
    assert_eq!(clock.key, ChildKey::Import("clock_gettime".into()));
    assert_eq!(
        clock.call_sites.len(),
        4,
        "two clock reads for the root, two for its body"
    );
    // Heights (eq. 2): vt_jitter calls only imports (1), the root one above.
    let jitter = ChildKey::Local(elf.lookup("vt_jitter").unwrap());
    assert_eq!(graph.height(&jitter), 1);
    assert_eq!(graph.root_height(), 2);
    let deep = elf.lookup("vt_root_deep").unwrap();
    let deep_graph = CallGraph::build(&elf, deep);
    assert_eq!(
        deep_graph.root_height(),
        3,
        "vt_root_deep → vt_mid → vt_jitter → usleep"
    );
    for name in ["vt_jitter", "vt_mid", "main"] {
        assert_matches_objdump(&elf, &bin, elf.lookup(name).unwrap());
    }
}

/// A non-PIE build has absolute addresses; file offsets must still point at
/// the function's bytes. Catches uprobe offsets computed as if vaddr were a
/// file offset.
#[test]
fn non_pie_addresses_and_file_offsets() {
    let bin = fixture::build(Variant::NoPie);
    let elf = ElfImage::load(&bin).unwrap();
    assert_eq!(elf.kind(), ElfKind::Executable);
    let root = elf.lookup("vt_root").unwrap();
    let f = &elf.functions()[root];
    assert!(f.address >= 0x400000, "non-PIE text is linked at 0x400000+");
    let offset = elf.file_offset(f.address).unwrap();
    assert_ne!(offset, f.address);
    let bytes = std::fs::read(&bin).unwrap();
    assert_eq!(
        &bytes[offset as usize..(offset + f.size_bytes) as usize],
        elf.code(f.address, f.size_bytes).unwrap()
    );
    let graph = CallGraph::build(&elf, root);
    assert_eq!(graph.children(root).len(), 5);
    assert_matches_objdump(&elf, &bin, root);
}

/// Catches a stripped binary reported as "symbol not found" (which sends
/// the user hunting for typos) instead of "stripped".
#[test]
fn stripped_binary_says_so() {
    let bin = fixture::build(Variant::Stripped);
    let err = ElfImage::load(&bin).unwrap_err();
    assert!(matches!(err, ElfError::Stripped { .. }), "{err}");
    assert!(err.to_string().contains("debug symbols"));
}

/// Catches lookups that give no hint, and imports mistaken for typos.
#[test]
fn missing_symbol_suggests_close_names() {
    let elf = ElfImage::load(&fixture::build(Variant::Pie)).unwrap();
    match elf.lookup("vt_roots") {
        Err(ElfError::SymbolNotFound { suggestions, .. }) => {
            assert!(
                suggestions.contains(&"vt_root".to_string()),
                "{suggestions:?}"
            );
        }
        other => panic!("expected SymbolNotFound, got {other:?}"),
    }
    assert!(matches!(
        elf.lookup("usleep"),
        Err(ElfError::Imported { .. })
    ));
    let root = elf.lookup("vt_root").unwrap();
    let by_address = format!("{:#x}", elf.functions()[root].address);
    assert_eq!(elf.lookup(&by_address).unwrap(), root);
}

/// `nm -D` output: (address, versioned name) of defined dynamic symbols.
fn nm_dynamic(binary: &str) -> Vec<(u64, String)> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only", binary])
        .output()
        .expect("run nm");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let addr = u64::from_str_radix(it.next()?, 16).ok()?;
            let _kind = it.next()?;
            Some((addr, it.next()?.to_owned()))
        })
        .collect()
}

/// libc.so.6 has only .dynsym: functions, versions and callees must come
/// from it. perror's calls are checked against objdump (including its call
/// to a static helper without a symbol, which is img_perror) and must name
/// fileno and dup, which perror has called in every glibc. Versioned names
/// are checked against nm: catches binding a plain name to the hidden
/// (old) version, or losing one version of a symbol.
#[test]
fn libc_symbols_versions_and_callees() {
    let elf = ElfImage::load(Path::new(LIBC)).unwrap();
    assert_eq!(elf.kind(), ElfKind::SharedLibrary);
    assert_eq!(elf.symbol_source(), SymbolSource::Dynsym);
    let perror = elf.lookup("perror").unwrap();
    assert_matches_objdump(&elf, Path::new(LIBC), perror);
    let graph = CallGraph::build(&elf, perror);
    let names: Vec<String> = graph.children(perror).into_iter().map(|c| c.name).collect();
    for callee in ["fileno", "dup"] {
        assert!(
            names.contains(&callee.to_string()),
            "perror children: {names:?}"
        );
    }
    assert!(graph.root_height() >= 2, "perror → fdopen → malloc …");

    let nm = nm_dynamic(LIBC);
    let addr_of = |name: &str| nm.iter().find(|(_, n)| n == name).map(|(a, _)| *a);
    let (Some(new), Some(old)) = (addr_of("memcpy@@GLIBC_2.14"), addr_of("memcpy@GLIBC_2.2.5"))
    else {
        panic!("this libc lacks the two memcpy versions of x86-64 glibc");
    };
    let at = |name: &str| elf.functions()[elf.lookup(name).unwrap()].address;
    assert_eq!(
        at("memcpy"),
        new,
        "a plain name binds to the default version"
    );
    assert_eq!(at("memcpy@@GLIBC_2.14"), new);
    assert_eq!(at("memcpy@GLIBC_2.2.5"), old);
    // Aliases: every nm name at perror's address resolves to it.
    let p = elf.functions()[perror].address;
    for (_, name) in nm.iter().filter(|(a, _)| *a == p) {
        assert_eq!(elf.lookup(name).unwrap(), perror, "{name}");
    }
}

/// With unnamed children, perror's calls to static helpers (no symbol in
/// libc's .dynsym) become children `sub_ADDR`, and the code found for
/// them by following their control flow is in step with objdump's
/// disassembly: every call we find there is a call in objdump at the same
/// address with the same target. Catches a control-flow walk that decodes
/// from the middle of instructions, or unnamed calls dropped.
#[test]
fn libc_unnamed_callees_become_children() {
    let libc = Path::new(LIBC);
    let elf = ElfImage::load(libc).unwrap();
    let perror = elf.lookup("perror").unwrap();
    let unnamed_targets: Vec<u64> = super::calls::function_calls(&elf, perror)
        .call_sites
        .iter()
        .filter_map(|c| match c.callee {
            Callee::Unnamed { target } if elf.function_containing(target).is_none() => Some(target),
            _ => None,
        })
        .collect();
    assert!(!unnamed_targets.is_empty(), "perror calls a static helper");
    let graph = CallGraph::build_with(&elf, perror, true);
    let children = graph.children(perror);
    for t in &unnamed_targets {
        let name = format!("sub_{t:x}");
        let child = children
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("{name} missing from {children:?}"));
        assert_eq!(child.key, ChildKey::Unnamed(*t));
        let calls = super::extent::unnamed_function_calls(&elf, *t);
        let Some(last) = calls.call_sites.last() else {
            continue;
        };
        let theirs = objdump_calls(libc, *t, last.return_address);
        for cs in &calls.call_sites {
            let Some((_, target, _)) = theirs.iter().find(|c| c.0 == cs.call_address) else {
                panic!(
                    "{:#x} in {name}: objdump sees no call there",
                    cs.call_address
                );
            };
            if let Callee::Local(i) = cs.callee
                && !elf.in_plt(target.unwrap_or(0))
            {
                assert_eq!(Some(elf.functions()[i].address), *target);
            }
        }
    }
    // Without the option they stay in img_perror.
    let plain = CallGraph::build(&elf, perror);
    assert!(
        plain
            .children(perror)
            .iter()
            .all(|c| !c.name.starts_with("sub_"))
    );
}
