//! Algorithm 2 (Sec. 3.3) as a state machine the live command drives round
//! by round:
//!
//! ```text
//! let mut b = Breakdown::new(root, config);
//! while let Some(table) = b.next_table(&graph) {   // lines 7–11
//!     let invocations = measure(table)?;           // probes, one round
//!     b.observe(&invocations, &graph)?;            // lines 12–32
//! }
//! // b.tree(), b.factors(), b.selected(): the result
//! ```
//!
//! The paper asks a person whether a selected function "needs break down";
//! here it is decided automatically: a selected variance of a real function
//! is broken down when its machine code has measurable children and it has
//! not been broken down yet; otherwise it is kept (pinned, lines 28–30).
//! After a break-down, an instance one of whose children explains at least
//! `min_child_share` of its variance is zeroed (lines 13–14), so the
//! children compete in the next selection; if none does, the function's
//! own variance stays, and, being already broken down, it is pinned the
//! next time it is selected.
//!
//! Every round measures the whole tree broken down so far (not only the new
//! level), so all numbers of a round come from the same invocations.
//!
//! Calls to code no symbol names (a stripped binary's static functions)
//! start as part of their caller's img. When an img_F is selected and F
//! makes such calls, they become children from the next round on,
//! everywhere in the tree (the instances already broken down gain them
//! too): img_F is "the time of F's simple statements, without invoking
//! other functions" (Sec. 3.1), so a call is a child, named or not, and the
//! breakdown does not stop at "F's own code" while F's time is in its
//! callees. A selected F whose only measurable calls are to such code is
//! broken down into them directly.
use std::collections::{HashMap, HashSet};

use super::{
    callgraph::{CallGraph, Child},
    select::{Adjustments, Factor, factors, rank_order, select, select_literal},
};
use ttp_variance::{ChildSlot, ChildTable, FnName, Invocation, Term, TreeError, VarianceTree};

/// What Algorithm 2 needs from the static call graph.
pub trait CallGraphView {
    /// height(call_graph) of eq. 2: the height of the root.
    fn root_height(&self) -> u32;
    /// Height of a function by display name (0 for imports and leaves).
    fn height(&self, function: &str) -> u32;
    /// The measurable children of a function (none for an import).
    fn children(&self, function: &str) -> Vec<Child>;
    /// Its calls to code no symbol names, when [`Self::children`] leaves
    /// them out.
    fn unnamed_children(&self, _function: &str) -> Vec<Child> {
        Vec::new()
    }
}

impl CallGraphView for CallGraph<'_> {
    fn root_height(&self) -> u32 {
        CallGraph::root_height(self)
    }
    fn height(&self, function: &str) -> u32 {
        self.key(function)
            .map_or(0, |k| CallGraph::height(self, &k))
    }
    fn children(&self, function: &str) -> Vec<Child> {
        match self.key(function) {
            Some(k) => self.children_of(&k),
            None => Vec::new(),
        }
    }
    fn unnamed_children(&self, function: &str) -> Vec<Child> {
        match self.key(function) {
            Some(k) => self.unnamed_children_of(&k),
            None => Vec::new(),
        }
    }
}

/// Inputs of Algorithm 2.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BreakdownConfig {
    /// k: at most this many factors are selected.
    pub k: usize,
    /// d: minimum contribution, as a share of Var(root).
    pub threshold_share: f64,
    /// m: a child explaining at least this share of its parent's variance
    /// makes the parent unimportant.
    pub min_child_share: f64,
    /// Measurement rounds at most (1: break down the root only).
    pub max_rounds: usize,
}

/// What one round did.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RoundSummary {
    pub round: usize,
    pub invocations: usize,
    pub root_variance_ns2: f64,
    /// Instances broken down in this round (paths from the root).
    pub broken_down: Vec<Vec<String>>,
    /// Factors selected at the end of the round.
    pub selected: Vec<String>,
    /// Functions to break down in the next round.
    pub next: Vec<String>,
    /// Calls to code without a symbol became children after this round,
    /// because of this selected factor.
    #[serde(default)]
    pub unnamed_opened: Option<UnnamedOpened>,
}

/// Why calls to code without a symbol became children.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct UnnamedOpened {
    /// The selected factor (`Var(img_PortalRun)`).
    pub factor: String,
    /// The function whose calls they are (`PortalRun`).
    pub function: String,
    /// Its share of Var(root).
    pub share: f64,
}

/// Algorithm 2's state between rounds.
#[derive(Debug)]
pub struct Breakdown {
    config: BreakdownConfig,
    table: ChildTable,
    /// Instances broken down so far: path → slot (`None`: the root).
    expanded: HashMap<Vec<String>, Option<usize>>,
    /// Instances broken down by the table not yet observed.
    fresh: Vec<Vec<String>>,
    /// l: functions whose variance is to be broken down next.
    pending: Vec<String>,
    adjustments: Adjustments,
    rounds: Vec<RoundSummary>,
    last: Option<(VarianceTree, Vec<Factor>, Vec<usize>)>,
    /// The last round's factors (as in `last`) that Algorithm 1 as printed
    /// would select (break at the first under d), shown beside ttp's.
    literal: Vec<usize>,
    /// Measure only these children of the root (`--children F1,F2`).
    root_children: Option<Vec<String>>,
    /// Calls to code without a symbol are children (see the module's doc).
    unnamed: bool,
    /// Instances broken down before `unnamed` was set, whose calls to code
    /// without a symbol are to be added next round.
    reopen: Vec<Vec<String>>,
    /// Instances whose calls to code without a symbol are in the table.
    with_unnamed: HashSet<Vec<String>>,
    /// Rounds ran out while functions were still to be broken down.
    pub stopped_early: bool,
}

impl Breakdown {
    /// Lines 1–5: the tree holds Var(root), and l = {Var(root)}.
    pub fn new(root: impl Into<String>, config: BreakdownConfig) -> Self {
        let root = root.into();
        Self {
            config,
            table: ChildTable::new(root.clone()),
            expanded: HashMap::new(),
            fresh: Vec::new(),
            pending: vec![root],
            adjustments: Adjustments::default(),
            rounds: Vec::new(),
            last: None,
            literal: Vec::new(),
            root_children: None,
            unnamed: false,
            reopen: Vec::new(),
            with_unnamed: HashSet::new(),
            stopped_early: false,
        }
    }

    /// The children `function` is broken down into now, and whether its
    /// calls to code without a symbol are among them.
    fn children_of(&self, graph: &dyn CallGraphView, function: &str) -> (Vec<Child>, bool) {
        let mut children = graph.children(function);
        let unnamed = graph.unnamed_children(function);
        let with_unnamed = !unnamed.is_empty() && (self.unnamed || children.is_empty());
        if with_unnamed {
            children.extend(unnamed);
        }
        (children, with_unnamed)
    }

    /// Measures only the named children of the root (the others' time is
    /// then part of img_root).
    pub(crate) fn only_root_children(mut self, names: Vec<String>) -> Self {
        self.root_children = Some(names);
        self
    }

    /// Lines 7–11: adds the children of every instance of the pending
    /// functions to the child table and returns it to be measured, or
    /// `None` when Algorithm 2 has finished.
    pub fn next_table(&mut self, graph: &dyn CallGraphView) -> Option<&ChildTable> {
        if self.pending.is_empty() && self.reopen.is_empty() {
            return None;
        }
        let pending = std::mem::take(&mut self.pending);
        let mut instances: Vec<(Vec<String>, Option<usize>)> = Vec::new();
        match &self.last {
            None => instances.push((vec![self.table.root.clone()], None)),
            Some((tree, _, _)) => {
                for (id, node) in tree.nodes.iter().enumerate() {
                    let Some(path) = tree.instance_path(id) else {
                        continue;
                    };
                    let name = path.last().expect("non-empty path");
                    if pending.contains(name) && !self.expanded.contains_key(&path) {
                        instances.push((path, node.slot));
                    }
                }
            }
        }
        self.fresh.clear();
        for path in std::mem::take(&mut self.reopen) {
            let Some(&slot) = self.expanded.get(&path) else {
                continue;
            };
            if !self.with_unnamed.insert(path.clone()) {
                continue;
            }
            let function = path.last().expect("non-empty path");
            let new = graph.unnamed_children(function);
            if new.is_empty() || (slot.is_none() && self.root_children.is_some()) {
                continue;
            }
            for child in new {
                self.table.slots.push(ChildSlot {
                    parent: slot,
                    function: child.name,
                    call_sites: child.call_sites,
                });
            }
            self.fresh.push(path);
        }
        for (path, slot) in instances {
            let function = path.last().expect("non-empty path").clone();
            let (mut children, with_unnamed) = self.children_of(graph, &function);
            if with_unnamed {
                self.with_unnamed.insert(path.clone());
            }
            if slot.is_none() && self.root_children.is_some() && !with_unnamed {
                // `--children` may name code without a symbol (sub_ADDR).
                children.extend(graph.unnamed_children(&function));
                self.with_unnamed.insert(path.clone());
            }
            for child in children {
                if slot.is_none()
                    && let Some(only) = &self.root_children
                    && !only.contains(&child.name)
                {
                    continue;
                }
                self.table.slots.push(ChildSlot {
                    parent: slot,
                    function: child.name,
                    call_sites: child.call_sites,
                });
            }
            self.expanded.insert(path.clone(), slot);
            self.fresh.push(path);
        }
        Some(&self.table)
    }

    /// Lines 12–32 on one round's invocations (measured with the table
    /// [`Self::next_table`] returned).
    pub fn observe(
        &mut self,
        invocations: &[Invocation],
        graph: &dyn CallGraphView,
    ) -> Result<&RoundSummary, TreeError> {
        let tree = VarianceTree::compute(&self.table, invocations)?;
        let paths: HashMap<Vec<String>, usize> = (0..tree.nodes.len())
            .filter_map(|id| tree.instance_path(id).map(|p| (p, id)))
            .collect();
        // Lines 12–16, re-applied to every broken-down instance with this
        // round's numbers.
        for path in self.expanded.keys() {
            let Some(&id) = paths.get(path) else { continue };
            let node = &tree.nodes[id];
            let dominated = node.value_ns2 > 0.0
                && node.children.iter().any(|&c| {
                    tree.nodes[c].value_ns2 / node.value_ns2 >= self.config.min_child_share
                });
            if dominated {
                self.adjustments.zeroed.insert(path.clone());
            } else {
                self.adjustments.zeroed.remove(path);
            }
        }
        // Line 21: Algorithm 1.
        let ranked = factors(
            &tree,
            &|f| graph.height(f),
            graph.root_height(),
            &self.adjustments,
        );
        let selected = select(&ranked, self.config.k, self.config.threshold_share);
        let literal_terms: Vec<Term> =
            select_literal(&ranked, self.config.k, self.config.threshold_share)
                .into_iter()
                .map(|i| ranked[i].term.clone())
                .collect();
        // Lines 22–32.
        let round = self.rounds.len() + 1;
        let mut next = Vec::new();
        let mut pin = HashSet::new();
        let mut unnamed_opened = None;
        for &i in &selected {
            let Term::Var(f) = &ranked[i].term else {
                continue;
            };
            let unopened = || {
                self.expanded
                    .keys()
                    .any(|p| p.last() == Some(&f.name) && !self.with_unnamed.contains(p))
            };
            if f.imaginary
                && !self.unnamed
                && !graph.unnamed_children(&f.name).is_empty()
                && unopened()
            {
                // img_F holds calls to code without a symbol: break down
                // into them rather than answer "F's own code", if a round
                // is left to measure them.
                if round >= self.config.max_rounds {
                    self.stopped_early = true;
                    continue;
                }
                self.unnamed = true;
                unnamed_opened = Some(UnnamedOpened {
                    factor: ranked[i].term.to_string(),
                    function: f.name.clone(),
                    share: ranked[i].share,
                });
                self.reopen = self.expanded.keys().cloned().collect();
                self.reopen.sort();
                continue;
            }
            if self.needs_break_down(f, &tree, graph) {
                next.push(f.name.clone());
            } else {
                pin.insert(ranked[i].term.clone());
            }
        }
        if (!next.is_empty() || !self.reopen.is_empty()) && round >= self.config.max_rounds {
            self.stopped_early = true;
            next.clear();
            self.reopen.clear();
        }
        // Show the factors kept in this round among the pinned ones, as the
        // next ranking would (their order among themselves is unchanged).
        let mut ranked = ranked;
        for f in ranked.iter_mut() {
            f.pinned |= pin.contains(&f.term);
        }
        let selected_terms: Vec<Term> = selected.iter().map(|&i| ranked[i].term.clone()).collect();
        ranked.sort_by(rank_order);
        let selected: Vec<usize> = selected_terms
            .iter()
            .filter_map(|t| ranked.iter().position(|f| &f.term == t))
            .collect();
        self.literal = literal_terms
            .iter()
            .filter_map(|t| ranked.iter().position(|f| &f.term == t))
            .collect();
        self.adjustments.pinned.extend(pin);
        self.pending = next.clone();
        self.rounds.push(RoundSummary {
            round,
            invocations: tree.invocations,
            root_variance_ns2: tree.root_variance_ns2(),
            broken_down: std::mem::take(&mut self.fresh),
            selected: selected
                .iter()
                .map(|&i| ranked[i].term.to_string())
                .collect(),
            next,
            unnamed_opened,
        });
        self.last = Some((tree, ranked, selected));
        Ok(self.rounds.last().expect("just pushed"))
    }

    /// A selected variance needs breaking down when it is a real function
    /// with measurable children, some instance of which is not broken down.
    fn needs_break_down(&self, f: &FnName, tree: &VarianceTree, graph: &dyn CallGraphView) -> bool {
        if f.imaginary || self.children_of(graph, &f.name).0.is_empty() {
            return false;
        }
        (0..tree.nodes.len()).any(|id| {
            tree.instance_path(id)
                .is_some_and(|p| p.last() == Some(&f.name) && !self.expanded.contains_key(&p))
        })
    }

    pub(crate) fn is_done(&self) -> bool {
        self.pending.is_empty() && self.reopen.is_empty() && self.last.is_some()
    }
    pub(crate) fn config(&self) -> &BreakdownConfig {
        &self.config
    }
    pub(crate) fn table(&self) -> &ChildTable {
        &self.table
    }
    pub(crate) fn rounds(&self) -> &[RoundSummary] {
        &self.rounds
    }
    /// The last round's tree.
    pub(crate) fn tree(&self) -> Option<&VarianceTree> {
        self.last.as_ref().map(|l| &l.0)
    }
    /// The last round's factors, ranked by responsibility.
    pub(crate) fn factors(&self) -> &[Factor] {
        self.last.as_ref().map_or(&[], |l| &l.1)
    }
    /// Indices into [`Self::factors`] of the selected ones (s*).
    pub(crate) fn selected(&self) -> &[usize] {
        self.last.as_ref().map_or(&[], |l| &l.2)
    }
    /// Indices into [`Self::factors`] that Algorithm 1 as printed (line 21's
    /// `break`) would have selected from the last round's ranking.
    pub(crate) fn literal_selected(&self) -> &[usize] {
        &self.literal
    }
    pub(crate) fn adjustments(&self) -> &Adjustments {
        &self.adjustments
    }
}
