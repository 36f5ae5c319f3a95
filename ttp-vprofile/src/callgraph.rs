//! The static call graph of Sec. 3.1–3.2: the direct calls in each
//! function's machine code (decoded with iced-x86), grouped into child
//! functions, and the heights that specificity (eq. 2) is computed from.
//!
//! A call site is a `call` instruction; its return address is the next
//! instruction. Targets are resolved as the dynamic linker would bind them:
//! a PLT stub (`.plt`, `.plt.sec`, `.plt.got`) is decoded to the GOT slot its
//! indirect `jmp` reads, and the slot's relocation names the symbol; a
//! `call *slot(%rip)` (code built with `-fno-plt`) reads the slot directly.
//! Calls whose target has no symbol, indirect calls, and tail calls (`jmp`
//! to another function, which returns straight to our caller) cannot be
//! measured as children: their time is part of the imaginary child
//! `img_F` together with F's own instructions (Sec. 3.1).
use std::collections::{HashMap, VecDeque};

use super::{
    calls::{Callee, FunctionCalls, function_calls},
    elf::ElfImage,
};

/// Identity of a child function.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ChildKey {
    Local(usize),
    Import(String),
    /// A function without a symbol, by entry address (`sub_ADDR`); only with
    /// [`CallGraph::build_with`]`(…, true)`.
    Unnamed(u64),
}

/// A node of the graph: a function with or without a symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum FnId {
    Local(usize),
    Unnamed(u64),
}

/// A child function of a parent (Sec. 3.1) and the parent's call sites to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    pub key: ChildKey,
    /// Display name, unique within the file.
    pub name: String,
    /// (call address, return address) of each call site in the parent.
    pub call_sites: Vec<(u64, u64)>,
}

/// The call graph below one root function, with heights.
#[derive(Debug)]
pub struct CallGraph<'a> {
    elf: &'a ElfImage,
    root: usize,
    /// Calls to functions without a symbol are children (`sub_ADDR`) from
    /// the start, rather than only once img asks for them
    /// ([`Self::unnamed_children_of`]). The graph and its heights always
    /// include them: they are the program's real call graph.
    unnamed_children: bool,
    calls: HashMap<FnId, FunctionCalls>,
    heights: HashMap<FnId, u32>,
    /// Display name → function, for every function reachable from the root
    /// and every import they call.
    names: HashMap<String, ChildKey>,
}

impl<'a> CallGraph<'a> {
    /// Decodes every function reachable from `root` through direct calls,
    /// named or not; the children of a function are its named callees
    /// (calls to code without a symbol are offered apart, by
    /// [`Self::unnamed_children_of`]).
    pub fn build(elf: &'a ElfImage, root: usize) -> Self {
        Self::build_with(elf, root, false)
    }

    /// As [`Self::build`]; with `unnamed_children`, a direct call to code
    /// no symbol covers is a child named `sub_ADDR` from the start. Its own
    /// code is found by following its control flow ([`super::extent`]).
    pub fn build_with(elf: &'a ElfImage, root: usize, unnamed_children: bool) -> Self {
        let mut g = Self {
            elf,
            root,
            unnamed_children,
            calls: HashMap::new(),
            heights: HashMap::new(),
            names: HashMap::new(),
        };
        let mut queue = VecDeque::from([FnId::Local(root)]);
        while let Some(f) = queue.pop_front() {
            if g.calls.contains_key(&f) {
                continue;
            }
            let fc = match f {
                FnId::Local(i) => function_calls(elf, i),
                FnId::Unnamed(a) => super::extent::unnamed_function_calls(elf, a),
            };
            for cs in &fc.call_sites {
                if let Some(id) = g.node_of(&cs.callee)
                    && !g.calls.contains_key(&id)
                {
                    queue.push_back(id);
                }
            }
            g.calls.insert(f, fc);
        }
        let succ = |f: FnId| -> Vec<Option<FnId>> {
            g.calls
                .get(&f)
                .map(|fc| {
                    fc.call_sites
                        .iter()
                        .filter_map(|cs| match g.child_key(&cs.callee, true)? {
                            ChildKey::Import(_) => Some(None), // a leaf child
                            k => Some(Some(to_id(&k))),
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let heights = heights(FnId::Local(root), succ);
        let mut names = HashMap::new();
        for (f, fc) in &g.calls {
            let key = match *f {
                FnId::Local(i) => ChildKey::Local(i),
                FnId::Unnamed(a) => ChildKey::Unnamed(a),
            };
            names.insert(g.name(&key), key);
            for cs in &fc.call_sites {
                if let Callee::Import { name } = &cs.callee {
                    names.insert(name.clone(), ChildKey::Import(name.clone()));
                }
            }
        }
        g.heights = heights;
        g.names = names;
        g
    }

    /// The child a callee is, if it can be measured (code without a
    /// symbol only with `unnamed`).
    fn child_key(&self, callee: &Callee, unnamed: bool) -> Option<ChildKey> {
        match callee {
            Callee::Local(i) => Some(ChildKey::Local(*i)),
            Callee::Import { name } => Some(ChildKey::Import(name.clone())),
            Callee::Unnamed { target }
                if unnamed
                    && self.elf.function_containing(*target).is_none()
                    && self.elf.code(*target, 1).is_some() =>
            {
                Some(ChildKey::Unnamed(*target))
            }
            Callee::Unnamed { .. } | Callee::Indirect => None,
        }
    }

    /// The graph node a callee is (imports are not nodes).
    fn node_of(&self, callee: &Callee) -> Option<FnId> {
        match self.child_key(callee, true)? {
            ChildKey::Import(_) => None,
            k => Some(to_id(&k)),
        }
    }

    pub fn elf(&self) -> &'a ElfImage {
        self.elf
    }
    pub(crate) fn root(&self) -> usize {
        self.root
    }
    /// Number of functions reachable from the root (the root included).
    pub(crate) fn reachable(&self) -> usize {
        self.calls.len()
    }
    /// Height in the call graph: 0 for a function that calls nothing
    /// measurable, else 1 + the largest height of its children; imported
    /// functions count as leaves (their code is in another file).
    /// Functions on a recursive cycle share the height of the cycle.
    pub(crate) fn height(&self, key: &ChildKey) -> u32 {
        match key {
            ChildKey::Import(_) => 0,
            k => self.heights.get(&to_id(k)).copied().unwrap_or(0),
        }
    }

    /// height(call_graph) of eq. 2: the height of the root.
    pub(crate) fn root_height(&self) -> u32 {
        self.height(&ChildKey::Local(self.root))
    }

    /// The function a display name stands for.
    pub fn key(&self, name: &str) -> Option<ChildKey> {
        self.names.get(name).cloned()
    }

    /// Display name of a function, unique within the file (a static name
    /// shared by several functions gets its address: `name[0x1234]`; a
    /// function without a symbol is `sub_ADDR`, its address in the file).
    pub fn name(&self, key: &ChildKey) -> String {
        match key {
            ChildKey::Import(n) => n.clone(),
            ChildKey::Local(i) => unique_name(self.elf, *i),
            ChildKey::Unnamed(a) => format!("sub_{a:x}"),
        }
    }

    /// The children of a function defined in this file (Sec. 3.1).
    pub fn children(&self, function: usize) -> Vec<Child> {
        self.children_of(&ChildKey::Local(function))
    }

    /// The children of `function` (Sec. 3.1), in order of their first call
    /// site. Calls that cannot be measured are not children: they are part
    /// of `img_function`. Calls to code without a symbol are children only
    /// when the graph was built with `unnamed_children`. An import has none.
    pub(crate) fn children_of(&self, function: &ChildKey) -> Vec<Child> {
        self.children_where(function, self.unnamed_children, |_| true)
    }

    /// The calls of `function` to code no symbol names, as children
    /// `sub_ADDR`, when [`Self::children_of`] leaves them out (else none).
    pub fn unnamed_children_of(&self, function: &ChildKey) -> Vec<Child> {
        if self.unnamed_children {
            return Vec::new();
        }
        self.children_where(function, true, |k| matches!(k, ChildKey::Unnamed(_)))
    }

    fn children_where(
        &self,
        function: &ChildKey,
        unnamed: bool,
        keep: impl Fn(&ChildKey) -> bool,
    ) -> Vec<Child> {
        if matches!(function, ChildKey::Import(_)) {
            return Vec::new();
        }
        let Some(fc) = self.calls.get(&to_id(function)) else {
            return Vec::new();
        };
        let mut out: Vec<Child> = Vec::new();
        for cs in &fc.call_sites {
            let Some(key) = self.child_key(&cs.callee, unnamed).filter(|k| keep(k)) else {
                continue;
            };
            let site = (cs.call_address, cs.return_address);
            match out.iter_mut().find(|c| c.key == key) {
                Some(c) => c.call_sites.push(site),
                None => out.push(Child {
                    name: self.name(&key),
                    key,
                    call_sites: vec![site],
                }),
            }
        }
        out
    }

    /// Where code without a symbol lies, as well as the symbols can say:
    /// the nearest function symbol before it and the offset from its start
    /// (`PortalRun+0x5a0`), as perf prints an address it cannot name.
    pub(crate) fn near_symbol(&self, name: &str) -> Option<String> {
        let ChildKey::Unnamed(address) = self.key(name)? else {
            return None;
        };
        let functions = self.elf.functions();
        let i = functions.partition_point(|f| f.address <= address);
        let before = i.checked_sub(1)?;
        let f = functions.get(before)?;
        Some(format!(
            "{}+{:#x}",
            unique_name(self.elf, before),
            address - f.address
        ))
    }
}

fn to_id(k: &ChildKey) -> FnId {
    match k {
        ChildKey::Local(i) => FnId::Local(*i),
        ChildKey::Unnamed(a) => FnId::Unnamed(*a),
        ChildKey::Import(_) => unreachable!("imports are not graph nodes"),
    }
}

/// `name`; `name@VERSION` when a plain name would bind to another version;
/// `name[0xaddr]` when static functions of several files share the name.
pub(crate) fn unique_name(elf: &ElfImage, i: usize) -> String {
    let f = &elf.functions()[i];
    if matches!(elf.lookup(&f.name), Ok(j) if j == i) {
        return f.name.clone();
    }
    if let Some(v) = &f.version {
        let versioned = format!("{}@{v}", f.name);
        if matches!(elf.lookup(&versioned), Ok(j) if j == i) {
            return versioned;
        }
    }
    format!("{}[{:#x}]", f.name, f.address)
}

/// Heights over the strongly connected components (Tarjan, iterative): a
/// component is finished only after every component it reaches, so one pass
/// in finishing order sees children before parents.
fn heights<T, F>(root: T, succ: F) -> HashMap<T, u32>
where
    T: Copy + Eq + std::hash::Hash,
    F: Fn(T) -> Vec<Option<T>>,
{
    let mut index: HashMap<T, usize> = HashMap::new();
    let mut low: HashMap<T, usize> = HashMap::new();
    let mut on_stack: HashMap<T, bool> = HashMap::new();
    let mut stack: Vec<T> = Vec::new();
    let mut comp_of: HashMap<T, usize> = HashMap::new();
    let mut comp_height: Vec<u32> = Vec::new();
    let mut next = 0usize;
    // Frames: (node, successors, position).
    let mut frames: Vec<(T, Vec<Option<T>>, usize)> = Vec::new();
    index.insert(root, next);
    low.insert(root, next);
    next += 1;
    stack.push(root);
    on_stack.insert(root, true);
    frames.push((root, succ(root), 0));
    while let Some((v, succs, pos)) = frames.last_mut() {
        let v = *v;
        if *pos < succs.len() {
            let w = succs[*pos];
            *pos += 1;
            let Some(w) = w else { continue };
            if let std::collections::hash_map::Entry::Vacant(e) = index.entry(w) {
                e.insert(next);
                low.insert(w, next);
                next += 1;
                stack.push(w);
                on_stack.insert(w, true);
                frames.push((w, succ(w), 0));
            } else if on_stack.get(&w) == Some(&true) {
                let lw = index[&w];
                let lv = low.get_mut(&v).expect("visited");
                *lv = (*lv).min(lw);
            }
            continue;
        }
        frames.pop();
        if let Some((parent, _, _)) = frames.last() {
            let lv = low[&v];
            let lp = low.get_mut(parent).expect("visited");
            *lp = (*lp).min(lv);
        }
        if low[&v] == index[&v] {
            let c = comp_height.len();
            let mut members = Vec::new();
            while let Some(w) = stack.pop() {
                on_stack.insert(w, false);
                comp_of.insert(w, c);
                members.push(w);
                if w == v {
                    break;
                }
            }
            // Every successor outside this component is already finished.
            let mut h: Option<u32> = None;
            for &m in &members {
                for s in succ(m) {
                    let child_h = match s {
                        None => Some(0),
                        Some(g) if comp_of.get(&g) != Some(&c) => {
                            comp_of.get(&g).map(|&cg| comp_height[cg])
                        }
                        Some(_) => None,
                    };
                    if let Some(ch) = child_h {
                        h = Some(h.map_or(ch + 1, |x| x.max(ch + 1)));
                    }
                }
            }
            comp_height.push(h.unwrap_or(0));
        }
    }
    comp_of
        .into_iter()
        .map(|(f, c)| (f, comp_height[c]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calls::CallSite;

    fn site(callee: Callee) -> CallSite {
        CallSite {
            call_address: 0,
            return_address: 0,
            callee,
        }
    }

    fn heights_of(root: usize, g: &HashMap<usize, FunctionCalls>) -> HashMap<usize, u32> {
        heights(root, |f| {
            g.get(&f)
                .map(|fc| {
                    fc.call_sites
                        .iter()
                        .filter_map(|cs| match &cs.callee {
                            Callee::Local(x) => Some(Some(*x)),
                            Callee::Import { .. } => Some(None),
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default()
        })
    }

    fn graph(edges: &[(usize, &[usize])]) -> HashMap<usize, FunctionCalls> {
        edges
            .iter()
            .map(|(f, cs)| {
                (
                    *f,
                    FunctionCalls {
                        call_sites: cs.iter().map(|&g| site(Callee::Local(g))).collect(),
                        ..Default::default()
                    },
                )
            })
            .collect()
    }

    /// Hand-computed heights on a diamond with a recursive pair: catches a
    /// height that follows back edges forever or ignores the longer branch.
    #[test]
    fn heights_on_dag_with_cycle() {
        // 0 → 1 → 3 (leaf); 0 → 2 → 4 ⇄ 5 → 3; 2 also calls an import.
        let mut g = graph(&[
            (0, &[1, 2]),
            (1, &[3]),
            (2, &[4]),
            (3, &[]),
            (4, &[5]),
            (5, &[4, 3]),
        ]);
        g.get_mut(&2).unwrap().call_sites.push(site(Callee::Import {
            name: "usleep".into(),
        }));
        let h = heights_of(0, &g);
        assert_eq!(h[&3], 0);
        assert_eq!(h[&1], 1);
        assert_eq!(h[&4], 1, "the cycle 4⇄5 sits one above leaf 3");
        assert_eq!(h[&5], 1);
        assert_eq!(h[&2], 2);
        assert_eq!(h[&0], 3);
    }

    /// A function calling only an import has height 1 (the import is a
    /// leaf); catches imports being ignored as children.
    #[test]
    fn import_is_a_leaf_child() {
        let mut g = graph(&[(0, &[])]);
        g.get_mut(&0).unwrap().call_sites.push(site(Callee::Import {
            name: "usleep".into(),
        }));
        assert_eq!(heights_of(0, &g)[&0], 1);
    }
}
