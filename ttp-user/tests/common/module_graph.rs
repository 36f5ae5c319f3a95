//! The file-level import graph of a crate (ttp-user/tests/imports.rs):
//! each crate's module tree read from its roots through `mod` and
//! `#[path]`, and the paths each file names, resolved to the files they
//! point into.
use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// A string literal's contents (for `#[path = "…"]`).
    Str(String),
    /// `::`
    Path,
    Punct(char),
}

/// The tokens of Rust source that matter for paths: identifiers, `::`,
/// punctuation and string literals. Comments, char literals and
/// lifetimes are dropped, so a doc link or a `'{'` is no path or brace.
fn tokens(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if ch == '"' {
            let start = i + 1;
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            out.push(Tok::Str(c[start..i.min(c.len())].iter().collect()));
            i += 1;
        } else if ch == 'r'
            && (next == Some('#') || next == Some('"'))
            && raw_string(&c, i).is_some()
        {
            let (text, end) = raw_string(&c, i).unwrap();
            out.push(Tok::Str(text));
            i = end;
        } else if ch == '\'' {
            // A char literal ('x', '\n', '\u{7f}') or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            // b"…" and br"…" are strings too; the prefix is no identifier.
            if !((word == "b" || word == "br" || word == "c") && c.get(i) == Some(&'"')) {
                out.push(Tok::Ident(word));
            }
        } else if ch == ':' && next == Some(':') {
            out.push(Tok::Path);
            i += 2;
        } else {
            if !ch.is_whitespace() && !ch.is_numeric() {
                out.push(Tok::Punct(ch));
            }
            i += 1;
        }
    }
    out
}

/// `r"…"` or `r#"…"#` starting at `i`: its contents and the index after it.
fn raw_string(c: &[char], i: usize) -> Option<(String, usize)> {
    let mut j = i + 1;
    let mut hashes = 0;
    while c.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if c.get(j) != Some(&'"') {
        return None;
    }
    let start = j + 1;
    let mut k = start;
    while k < c.len() {
        if c[k] == '"' && (1..=hashes).all(|h| c.get(k + h) == Some(&'#')) {
            return Some((c[start..k].iter().collect(), k + 1 + hashes));
        }
        k += 1;
    }
    None
}

/// What one file says about modules: the files it declares with `mod`
/// (name, `#[path]` if any, whether it is `#[cfg(test)]`) and the paths
/// it names outside its `#[cfg(test)]` modules, each absolute (from the
/// crate root) with an example of how it was written. Tests are left out:
/// a test of a type may use a helper that builds that type.
#[derive(Debug, Default)]
pub struct FileFacts {
    mods: Vec<(String, Option<String>, bool)>,
    paths: Vec<(Vec<String>, String)>,
}

fn ident(t: Option<&Tok>) -> Option<&str> {
    match t {
        Some(Tok::Ident(s)) => Some(s),
        _ => None,
    }
}

/// Reads one file of module `module` (segments from the crate root).
fn file_facts(module: &[String], src: &str) -> FileFacts {
    let toks = tokens(src);
    let mut facts = FileFacts::default();
    // Names of the enclosing braces: Some(name) for an inline `mod name {`,
    // and whether the brace is a `#[cfg(test)]` module.
    let mut scopes: Vec<Option<String>> = Vec::new();
    let mut tests: Vec<bool> = Vec::new();
    let mut pending_path: Option<String> = None;
    let mut pending_test = false;
    let mut children: BTreeSet<String> = BTreeSet::new();
    // The `mod NAME;` declarations first: a child is named by its bare name
    // anywhere in the file, also above its declaration.
    for w in toks.windows(3) {
        if let (Some("mod"), Some(name), Tok::Punct(';')) =
            (ident(w.first()), ident(w.get(1)), &w[2])
        {
            children.insert(name.to_string());
        }
    }
    let mut i = 0;
    while i < toks.len() {
        let prev = if i > 0 { toks.get(i - 1) } else { None };
        match &toks[i] {
            Tok::Punct('#')
                if ident(toks.get(i + 2)) == Some("cfg")
                    && ident(toks.get(i + 4)) == Some("test")
                    && toks.get(i + 5) == Some(&Tok::Punct(')')) =>
            {
                pending_test = true;
                i += 1;
            }
            Tok::Punct('#') if ident(toks.get(i + 2)) == Some("path") => {
                if let (Some(Tok::Punct('=')), Some(Tok::Str(p))) =
                    (toks.get(i + 3), toks.get(i + 4))
                {
                    pending_path = Some(p.clone());
                }
                i += 1;
            }
            Tok::Ident(kw) if kw == "mod" => {
                let name = ident(toks.get(i + 1)).unwrap_or_default().to_string();
                match toks.get(i + 2) {
                    Some(Tok::Punct(';')) => {
                        if scopes.iter().all(Option::is_none) {
                            let test = pending_test || tests.contains(&true);
                            facts.mods.push((name, pending_path.take(), test));
                        }
                        pending_test = false;
                        i += 3;
                    }
                    Some(Tok::Punct('{')) => {
                        scopes.push(Some(name));
                        tests.push(pending_test);
                        pending_path = None;
                        pending_test = false;
                        i += 3;
                    }
                    _ => i += 1,
                }
            }
            Tok::Punct('{') => {
                scopes.push(None);
                tests.push(pending_test);
                pending_path = None;
                pending_test = false;
                i += 1;
            }
            Tok::Punct('}') => {
                scopes.pop();
                tests.pop();
                i += 1;
            }
            Tok::Punct(';') => {
                pending_path = None;
                pending_test = false;
                i += 1;
            }
            Tok::Ident(kw) if kw == "use" && prev != Some(&Tok::Path) => {
                let mut here: Vec<String> = module.to_vec();
                here.extend(scopes.iter().flatten().cloned());
                let at_file_level = scopes.iter().all(Option::is_none);
                let (trees, end) = use_tree(&toks, i + 1, Vec::new());
                let trees = if tests.contains(&true) {
                    Vec::new()
                } else {
                    trees
                };
                for path in trees {
                    if let Some(abs) = absolute(&here, &path, at_file_level, &children) {
                        facts.paths.push((abs, format!("use {}", path.join("::"))));
                    }
                }
                i = end;
            }
            Tok::Ident(first)
                if toks.get(i + 1) == Some(&Tok::Path)
                    && prev != Some(&Tok::Path)
                    && ident(prev) != Some("in") =>
            {
                let mut path = vec![first.clone()];
                let mut j = i + 1;
                while toks.get(j) == Some(&Tok::Path)
                    && let Some(seg) = ident(toks.get(j + 1))
                {
                    path.push(seg.to_string());
                    j += 2;
                }
                let mut here: Vec<String> = module.to_vec();
                here.extend(scopes.iter().flatten().cloned());
                let at_file_level = scopes.iter().all(Option::is_none);
                if !tests.contains(&true)
                    && let Some(abs) = absolute(&here, &path, at_file_level, &children)
                {
                    facts.paths.push((abs, path.join("::")));
                }
                i = j;
            }
            _ => i += 1,
        }
    }
    facts
}

/// The paths of a `use` tree starting at token `i` (after `use` or a `{`
/// or `,` of a group), each prefixed with `prefix`; and the index after it.
fn use_tree(toks: &[Tok], mut i: usize, prefix: Vec<String>) -> (Vec<Vec<String>>, usize) {
    let mut path = prefix;
    let mut out = Vec::new();
    loop {
        match toks.get(i) {
            Some(Tok::Ident(s)) if s != "as" => {
                path.push(s.clone());
                i += 1;
            }
            Some(Tok::Path) => i += 1,
            Some(Tok::Punct('{')) => {
                i += 1;
                loop {
                    let (sub, end) = use_tree(toks, i, path.clone());
                    out.extend(sub);
                    i = end;
                    match toks.get(i) {
                        Some(Tok::Punct(',')) => i += 1,
                        Some(Tok::Punct('}')) => {
                            i += 1;
                            break;
                        }
                        _ => break,
                    }
                    if toks.get(i) == Some(&Tok::Punct('}')) {
                        i += 1;
                        break;
                    }
                }
                return (out, i);
            }
            Some(Tok::Punct('*')) => {
                i += 1;
            }
            Some(Tok::Ident(_)) => {
                // `as alias`
                i += 2;
            }
            _ => break,
        }
    }
    if !path.is_empty() {
        out.push(path);
    }
    if toks.get(i) == Some(&Tok::Punct(';')) {
        i += 1;
    }
    (out, i)
}

/// `path` as written in module `here`, from the crate root; None for a
/// path outside the crate (another crate, std, a local name).
fn absolute(
    here: &[String],
    path: &[String],
    at_file_level: bool,
    children: &BTreeSet<String>,
) -> Option<Vec<String>> {
    let first = path.first()?.as_str();
    let (mut base, rest) = match first {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (here.to_vec(), &path[1..]),
        "super" => {
            let mut base = here.to_vec();
            let mut rest = path;
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
            (base, rest)
        }
        name if at_file_level && children.contains(name) => (here.to_vec(), path),
        _ => return None,
    };
    base.extend(rest.iter().cloned());
    Some(base)
}

/// A crate's files: module path → file, and each file's facts, reached from
/// the roots through `mod` declarations. `read` gives a file's text.
pub struct Crate {
    pub modules: BTreeMap<Vec<String>, PathBuf>,
    pub facts: BTreeMap<PathBuf, FileFacts>,
}

pub fn read_crate(roots: &[PathBuf], read: &dyn Fn(&Path) -> Option<String>) -> Vec<Crate> {
    roots
        .iter()
        .filter_map(|root| {
            read(root)?;
            let mut krate = Crate {
                modules: BTreeMap::new(),
                facts: BTreeMap::new(),
            };
            let mut todo = vec![(Vec::<String>::new(), root.clone(), false)];
            while let Some((module, file, test)) = todo.pop() {
                let Some(text) = read(&file) else { continue };
                let mut facts = file_facts(&module, &text);
                if test {
                    facts.paths.clear();
                }
                let dir = file.parent().unwrap().to_path_buf();
                let stem = file.file_stem().unwrap().to_string_lossy().to_string();
                let own_dir = if module.is_empty() || stem == "mod" {
                    dir.clone()
                } else {
                    dir.join(&stem)
                };
                for (name, at, child_test) in &facts.mods {
                    let mut child = module.clone();
                    child.push(name.clone());
                    let candidates = match at {
                        Some(p) => vec![dir.join(p)],
                        None => vec![
                            own_dir.join(format!("{name}.rs")),
                            own_dir.join(name).join("mod.rs"),
                        ],
                    };
                    if let Some(f) = candidates.into_iter().find(|f| read(f).is_some()) {
                        todo.push((child, f, test || *child_test));
                    }
                }
                krate.modules.insert(module, file.clone());
                krate.facts.insert(file, facts);
            }
            Some(krate)
        })
        .collect()
}

/// file → the files it imports, each with one path that shows it.
pub fn import_graph(krate: &Crate) -> BTreeMap<PathBuf, BTreeMap<PathBuf, String>> {
    let mut graph: BTreeMap<PathBuf, BTreeMap<PathBuf, String>> = BTreeMap::new();
    for (file, facts) in &krate.facts {
        let edges = graph.entry(file.clone()).or_default();
        for (abs, written) in &facts.paths {
            let target = (0..=abs.len())
                .rev()
                .find_map(|n| krate.modules.get(&abs[..n]));
            if let Some(t) = target
                && t != file
            {
                edges.entry(t.clone()).or_insert_with(|| written.clone());
            }
        }
    }
    graph
}

/// The rings of the graph: its strongly connected components of two files
/// or more (Tarjan), each sorted.
pub fn rings(graph: &BTreeMap<PathBuf, BTreeMap<PathBuf, String>>) -> Vec<Vec<PathBuf>> {
    struct State<'a> {
        graph: &'a BTreeMap<PathBuf, BTreeMap<PathBuf, String>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        out: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a PathBuf) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flat_map(|e| e.keys()) {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut ring = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                ring.push(w.clone());
                if w == v {
                    break;
                }
            }
            if ring.len() > 1 {
                ring.sort();
                s.out.push(ring);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// Each ring as text: its files and, for each, the files of the ring it
/// imports and how.
pub fn describe(
    graph: &BTreeMap<PathBuf, BTreeMap<PathBuf, String>>,
    ring: &[PathBuf],
    base: &Path,
) -> String {
    let show = |p: &Path| p.strip_prefix(base).unwrap_or(p).display().to_string();
    let mut text = String::from("ring:\n");
    for f in ring {
        for (to, how) in &graph[f] {
            if ring.contains(to) {
                text += &format!("  {} -> {} ({how})\n", show(f), show(to));
            }
        }
    }
    text
}
