//! The modules follow the data flow (docs/architecture.md, "Modules"): a
//! module may import from its own layer and the layers below it, never from
//! a layer above. This test reads the source tree, finds every `crate::X`
//! path (in `use` lines, grouped `use crate::{X, Y}` and inline paths) and
//! fails on an import that points up. The same table is the module table of
//! docs/architecture.md, which is parsed and compared with it, and every
//! top-level module of `src/` must have a row.
use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

use crate::common::rust_files;

/// The layers, lowest first. Equal numbers share a layer.
const LAYERS: &[(&str, u32)] = &[
    ("error", 0),
    ("sys", 0),
    ("collect", 1),
    ("probe", 1),
    ("accounts", 2),
    ("window", 3),
    ("protocol", 4),
    ("pg", 5),
    ("commands", 5),
    ("lab", 5),
    ("serve", 5),
    ("report", 6),
    ("cli", 7),
];

/// Imports that still point up, each named with the module it waits for.
/// The list only shrinks: an upward import not in it fails the test, and an
/// entry that no longer occurs fails it too. Empty: every module imports
/// only from its own layer and those below.
const KNOWN_UPWARD: &[(&str, &str)] = &[];

/// The workspace's userspace crates, lowest first. Cargo holds the layers
/// between them (each depends only on crates listed before it: an upward
/// import would be a dependency cycle, and no crate re-exports another's
/// modules, so a `crate::` path always names a module of its own crate);
/// this test holds the layers inside each. A crate given a module name is
/// that module as a whole: each protocol is a crate of its own, and the
/// crates of one layer (the protocols, the variance tree below them) do not
/// depend on each other except where Cargo.toml says so (compare on the
/// protocols it compares).
const CRATES: &[(&str, Option<&str>)] = &[
    ("ttp-sys", None),
    ("ttp-ledger", None),
    ("ttp-window", None),
    ("ttp-variance", Some("protocol")),
    ("ttp-ttpv2", Some("protocol")),
    ("ttp-emp", Some("protocol")),
    ("ttp-vprofile", Some("protocol")),
    ("ttp-statements", Some("protocol")),
    ("ttp-blame", Some("protocol")),
    ("ttp-load", Some("protocol")),
    ("ttp-compare", Some("protocol")),
    ("ttp-serve", None),
    ("ttp-user", None),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every userspace crate's `src/` with the module it is as a whole, if any.
fn src_dirs() -> Vec<(PathBuf, Option<&'static str>)> {
    CRATES
        .iter()
        .map(|(c, whole)| (root().join(c).join("src"), *whole))
        .collect()
}

/// (src dir, the module the crate is as a whole, file) for every Rust file
/// of every crate, sorted.
fn all_files() -> Vec<(PathBuf, Option<&'static str>, PathBuf)> {
    let mut out = Vec::new();
    for (src, whole) in src_dirs() {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        files.sort();
        out.extend(files.into_iter().map(|f| (src.clone(), whole, f)));
    }
    out
}

/// The top-level module a file belongs to (`None` for lib.rs and main.rs
/// of a crate of several modules; a crate that is one module as a whole
/// is that module in every file).
fn top_module(src: &Path, whole: Option<&str>, file: &Path) -> Option<String> {
    if let Some(m) = whole {
        return Some(m.to_string());
    }
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next()?.as_os_str().to_string_lossy();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    (name != "lib" && name != "main").then_some(name)
}

/// Source without `//` comments (doc links are not imports) and without
/// string literals' contents.
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_str = false;
        let mut prev = ' ';
        let mut kept = String::new();
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if !in_str && c == '/' && chars.get(i + 1) == Some(&'/') {
                break;
            }
            if c == '"' && prev != '\\' {
                in_str = !in_str;
            } else if !in_str {
                kept.push(c);
            }
            prev = if prev == '\\' && c == '\\' { ' ' } else { c };
            i += 1;
        }
        out.push_str(&kept);
        out.push('\n');
    }
    out
}

fn ident_at(s: &str) -> String {
    s.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The top-level modules named by `crate::` paths in `code`.
fn imported_modules(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // e.g. `ttp_crate::`
        }
        let rest = code[at + "crate::".len()..].trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a::b, c, d::{e, f}}`: the first name of each item at
            // depth one.
            let mut depth = 0;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && depth == 0 && !c.is_whitespace() => {
                        item_start = false;
                        let name = ident_at(&group[i..]);
                        if !name.is_empty() {
                            found.insert(name);
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident_at(rest);
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

/// (importing file relative to src, its module, the module it imports)
fn upward_imports() -> Vec<(String, String, String)> {
    let layer: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let mut up = Vec::new();
    for (src, whole, f) in &all_files() {
        if whole.is_some() {
            continue; // `crate::` in a one-module crate stays inside that module
        }
        let Some(from) = top_module(src, None, f) else {
            continue;
        };
        let from_layer = *layer
            .get(from.as_str())
            .unwrap_or_else(|| panic!("module `{from}` has no layer in LAYERS"));
        let code = code_only(&fs::read_to_string(f).unwrap());
        for to in imported_modules(&code) {
            let Some(&to_layer) = layer.get(to.as_str()) else {
                continue; // an item of lib.rs, not a module
            };
            if to_layer > from_layer {
                let rel = f.strip_prefix(src).unwrap().display().to_string();
                up.push((rel, from.clone(), to));
            }
        }
    }
    up
}

/// Catches a module that imports from a layer above its own.
#[test]
fn no_module_imports_from_a_layer_above() {
    let up = upward_imports();
    let unexpected: Vec<String> = up
        .iter()
        .filter(|(file, _, to)| !KNOWN_UPWARD.contains(&(file.as_str(), to.as_str())))
        .map(|(file, from, to)| format!("{file}: `{from}` imports from `{to}`, a layer above"))
        .collect();
    assert!(
        unexpected.is_empty(),
        "upward imports (move the type down to the layer that uses it):\n{}",
        unexpected.join("\n")
    );
    let stale: Vec<&(&str, &str)> = KNOWN_UPWARD
        .iter()
        .filter(|(file, to)| !up.iter().any(|(f, _, t)| f == file && t == to))
        .collect();
    assert!(
        stale.is_empty(),
        "no longer upward, remove from KNOWN_UPWARD: {stale:?}"
    );
}

/// Catches a new top-level module without a layer, and a layer given to a
/// module that does not exist.
#[test]
fn every_module_has_a_layer() {
    let modules: BTreeSet<String> = all_files()
        .iter()
        .filter_map(|(src, whole, f)| top_module(src, *whole, f))
        .collect();
    let table: BTreeSet<String> = LAYERS.iter().map(|(m, _)| m.to_string()).collect();
    assert_eq!(modules, table, "src/ modules vs LAYERS");
}

/// Catches a module placed in a crate below a layer it depends on, or
/// above one that depends on it: each crate's layers lie at or above those
/// of the crate below it, so the crate order and the layer order agree.
#[test]
fn crates_follow_the_layers() {
    let layer: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let mut below_max = 0;
    for (src, whole) in src_dirs() {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let layers: BTreeSet<u32> = files
            .iter()
            .filter_map(|f| top_module(&src, whole, f))
            .map(|m| layer[m.as_str()])
            .collect();
        let (Some(&lo), Some(&hi)) = (layers.first(), layers.last()) else {
            panic!("{} holds no module", src.display());
        };
        assert!(
            lo >= below_max,
            "{} holds layer {lo}, below layer {below_max} of a crate under it",
            src.display()
        );
        below_max = hi;
    }
}

/// The module table of docs/architecture.md: rows `| layer | `module/` | … |`.
fn documented_layers() -> Vec<(String, u32)> {
    let doc = root().join("docs/architecture.md");
    let text = fs::read_to_string(&doc).unwrap();
    let start = text
        .find("## Modules")
        .expect("docs/architecture.md has a \"## Modules\" section");
    let mut rows = Vec::new();
    for line in text[start..].lines().skip(1) {
        if line.starts_with("## ") {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 {
            continue;
        }
        let (Ok(n), Some(name)) = (
            cells[1].parse::<u32>(),
            cells[2].strip_prefix('`').and_then(|c| c.strip_suffix('`')),
        ) else {
            continue;
        };
        let name = name.trim_end_matches('/').trim_end_matches(".rs");
        rows.push((name.to_string(), n));
    }
    rows
}

/// Catches docs/architecture.md disagreeing with the enforced table.
#[test]
fn architecture_doc_lists_the_same_layers() {
    let documented: BTreeMap<String, u32> = documented_layers().into_iter().collect();
    let enforced: BTreeMap<String, u32> = LAYERS.iter().map(|(m, n)| (m.to_string(), *n)).collect();
    assert_eq!(
        documented, enforced,
        "docs/architecture.md module table vs LAYERS"
    );
}

/// The parser itself, on the forms the tree uses.
#[test]
fn finds_grouped_inline_and_plain_imports() {
    let code = code_only(
        "use crate::{\n    accounts::{Image, Window},\n    sys::clock,\n    error,\n};\n\
         use crate::probe::Ledger;\n\
         fn f() { crate::report::atomic::write(p, b) }\n\
         // see crate::cli for the command\n\
         let s = \"crate::pg\";\n",
    );
    let found: Vec<String> = imported_modules(&code).into_iter().collect();
    assert_eq!(found, ["accounts", "error", "probe", "report", "sys"]);
}

/// Catches a crate that re-exports another crate's modules or items under
/// its own name (`pub use ttp_ledger::probe`): a path then no longer says
/// where its item lives.
#[test]
fn no_crate_re_exports_another() {
    let mut found = Vec::new();
    for (src, _) in src_dirs() {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for f in files {
            let code = code_only(&fs::read_to_string(&f).unwrap());
            for line in code.lines() {
                if let Some(rest) = line.trim_start().strip_prefix("pub use ")
                    && rest.trim_start().starts_with("ttp_")
                {
                    found.push(format!("{}: {}", f.display(), line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "re-exports of other crates:\n{}",
        found.join("\n")
    );
}

/// Catches a protocol crate that depends on another protocol: only
/// `ttp-compare` reads the others' results. The manifests are what Cargo
/// builds from, so this reads them.
#[test]
fn protocols_depend_only_on_layers_below() {
    let protocols: Vec<&str> = CRATES
        .iter()
        .filter(|(c, whole)| whole.is_some() && *c != "ttp-variance")
        .map(|(c, _)| *c)
        .collect();
    for p in protocols.iter().filter(|p| **p != "ttp-compare") {
        let manifest = fs::read_to_string(root().join(p).join("Cargo.toml")).unwrap();
        let deps: Vec<&str> = protocols
            .iter()
            .copied()
            .filter(|q| q != p && manifest.lines().any(|l| l.starts_with(&format!("{q} ="))))
            .collect();
        assert!(deps.is_empty(), "{p} depends on the protocols {deps:?}");
    }
}
