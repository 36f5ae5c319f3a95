//! Names from a separate debug file, and the breakdown that does not stop
//! at img when no name is found, on the vprof-target fixture split as a
//! distribution ships a program ([`fixture::build_split`]): the roots
//! exported, everything below them static, named only by the debug file.
//! The durations are the program's own clock readings, fed in through the
//! child table as probes would.
use std::path::{Path, PathBuf};

use super::{
    breakdown::{Breakdown, BreakdownConfig},
    callgraph::CallGraph,
    elf::ElfImage,
    fixture::{self, Records},
};
use ttp_ledger::probe::symbols::DebugSearch;
use ttp_ledger::probe::symbols::SymbolSource;

/// A debug directory that holds nothing: the search runs, finds only
/// what is next to the binary.
fn empty_dirs() -> (tempfile::TempDir, DebugSearch) {
    let d = tempfile::tempdir().unwrap();
    let search = DebugSearch {
        dirs: vec![d.path().to_owned()],
        debuginfod: Vec::new(),
        cache: None,
    };
    (d, search)
}

/// The split binary copied alone into a directory of its own (its debug
/// link then points at nothing).
fn alone(split: &fixture::Split, dir: &Path) -> PathBuf {
    let bin = dir.join("vprof-target-split");
    std::fs::copy(&split.binary, &bin).unwrap();
    bin
}

/// Addresses by name, from the debug file (what `nm` reads).
fn address_in_debug_file(split: &fixture::Split, name: &str) -> u64 {
    let elf = ElfImage::load(&split.debug).unwrap();
    elf.functions()[elf.lookup(name).unwrap()].address
}

const CONFIG: BreakdownConfig = BreakdownConfig {
    k: 3,
    threshold_share: 0.05,
    min_child_share: 0.8,
    max_rounds: 6,
};

fn run_breakdown(graph: &CallGraph, records: &Records) -> Breakdown {
    run_rounds(graph, records, CONFIG)
}

fn run_rounds(graph: &CallGraph, records: &Records, config: BreakdownConfig) -> Breakdown {
    let mut b = Breakdown::new("vt_root_deep", config);
    while let Some(table) = b.next_table(graph) {
        let invocations = records.invocations(table);
        b.observe(&invocations, graph).expect("round");
    }
    b
}

/// The path by which the last round reached usleep's variance. It need
/// not be the largest factor: under other load the preemptions of the
/// root's own constant work make its img as large (a CI run beside
/// stress-ng selected Var(img_vt_root_deep), then Var(usleep)). What is
/// held is that the breakdown reaches usleep, by this path.
fn usleep_path(b: &Breakdown) -> String {
    let f = b
        .selected()
        .iter()
        .map(|&i| &b.factors()[i])
        .find(|f| f.term.to_string() == "Var(usleep)")
        .unwrap_or_else(|| panic!("usleep not selected: {:#?}", b.rounds()));
    b.tree()
        .unwrap()
        .instance_path(f.instances[0])
        .unwrap()
        .join("/")
}

/// Catches the debug file not searched (by its link or by build-id), its
/// names not used, or the report not saying where they came from.
#[test]
fn static_functions_are_named_by_the_debug_file() {
    let dir = tempfile::tempdir().unwrap();
    let split = fixture::build_split(dir.path());
    let (_empty, search) = empty_dirs();

    let plain = ElfImage::load(&split.binary).unwrap();
    assert_eq!(plain.symbol_source(), SymbolSource::Dynsym);
    assert!(plain.lookup("vt_mid").is_err());

    let linked = ElfImage::load_with(&split.binary, &search).unwrap();
    assert_eq!(linked.symbol_source(), SymbolSource::DebugLink);
    assert_eq!(linked.symbol_file(), Some(split.debug.as_path()));
    let mid = linked.lookup("vt_mid").unwrap();
    assert_eq!(
        linked.functions()[mid].address,
        address_in_debug_file(&split, "vt_mid")
    );

    let other = tempfile::tempdir().unwrap();
    let bin = alone(&split, other.path());
    let hex: String = {
        let data = std::fs::read(&bin).unwrap();
        let ids = ttp_ledger::probe::symbols::DebugIds::of(&object::File::parse(&*data).unwrap());
        ids.build_id
            .unwrap()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let ids_dir = other.path().join("debug/.build-id").join(&hex[..2]);
    std::fs::create_dir_all(&ids_dir).unwrap();
    std::fs::copy(&split.debug, ids_dir.join(format!("{}.debug", &hex[2..]))).unwrap();
    let by_id = DebugSearch {
        dirs: vec![other.path().join("debug")],
        debuginfod: Vec::new(),
        cache: None,
    };
    let found = ElfImage::load_with(&bin, &by_id).unwrap();
    assert_eq!(found.symbol_source(), SymbolSource::BuildId);
    assert!(found.lookup("vt_jitter").is_ok());
}

/// With the debug file: the breakdown descends root → vt_mid → vt_jitter
/// → usleep by name. Without it: the same functions, reached as sub_ADDR
/// (their addresses in the debug file) without being asked, after img of
/// the root was selected, and named by the nearest symbol before them.
/// Catches the breakdown stopping at img_vt_root_deep, code without a
/// symbol measured as the wrong function, or a different answer with and
/// without names.
#[test]
fn without_names_the_breakdown_reaches_the_same_function() {
    let dir = tempfile::tempdir().unwrap();
    let split = fixture::build_split(dir.path());
    let records = fixture::run(&split.binary, "deep", 200);
    let (_empty, search) = empty_dirs();

    let named = ElfImage::load_with(&split.binary, &search).unwrap();
    let graph = CallGraph::build(&named, named.lookup("vt_root_deep").unwrap());
    let b = run_breakdown(&graph, &records);
    assert_eq!(usleep_path(&b), "vt_root_deep/vt_mid/vt_jitter/usleep");
    assert!(b.rounds().iter().all(|r| r.unnamed_opened.is_none()));

    let other = tempfile::tempdir().unwrap();
    let bin = alone(&split, other.path());
    let bare = ElfImage::load_with(&bin, &search).unwrap();
    assert_eq!(bare.symbol_source(), SymbolSource::Dynsym);
    let graph = CallGraph::build(&bare, bare.lookup("vt_root_deep").unwrap());
    let sub = |f: &str| format!("sub_{:x}", address_in_debug_file(&split, f));
    let records = ["vt_mid", "vt_jitter", "vt_front", "vt_steady"]
        .iter()
        .fold(records, |r, f| r.renamed(f, &sub(f)));
    let b = run_breakdown(&graph, &records);
    assert_eq!(
        usleep_path(&b),
        format!("vt_root_deep/{}/{}/usleep", sub("vt_mid"), sub("vt_jitter"))
    );
    let opened: Vec<_> = b
        .rounds()
        .iter()
        .filter_map(|r| r.unnamed_opened.as_ref())
        .collect();
    assert_eq!(opened.len(), 1, "{:#?}", b.rounds());
    assert_eq!(opened[0].factor, "Var(img_vt_root_deep)");
    // With one round allowed, the img is the answer and the report says
    // the rounds stopped early; it does not promise a round that never ran.
    let one = run_rounds(
        &graph,
        &records,
        BreakdownConfig {
            max_rounds: 1,
            ..CONFIG
        },
    );
    assert!(one.stopped_early);
    assert!(one.rounds().iter().all(|r| r.unnamed_opened.is_none()));

    // The nearest symbol before it: no function of the file starts
    // between that symbol and vt_mid's address.
    let mid = address_in_debug_file(&split, "vt_mid");
    let near = graph.near_symbol(&sub("vt_mid")).unwrap();
    let (name, offset) = near.split_once("+0x").unwrap();
    let base = bare.functions()[bare.lookup(name).unwrap()].address;
    assert_eq!(base + u64::from_str_radix(offset, 16).unwrap(), mid);
    assert!(
        !bare
            .functions()
            .iter()
            .any(|f| f.address > base && f.address <= mid),
        "{near} is not the nearest symbol before {mid:#x}"
    );
}
