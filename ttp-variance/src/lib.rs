//! The variance tree of Sec. 3.1, computed from per-invocation durations.
//!
//! A measurement round records, for every invocation of the root function,
//! the root's duration and the summed duration of each measured child during
//! it ([`Invocation`]). Which child each column holds is the
//! [`ChildTable`]: a slot names a child function, the call sites in its
//! parent whose durations are summed into it, and its parent slot (none for
//! the root's own children), so one round can measure several levels.
//!
//! For a function X with measured children C1..Cm, `img_X = X − Σ Ci` per
//! invocation (Sec. 3.1), and eq. 1 splits Var(X) exactly into the variances
//! of C1..Cm and img_X plus twice their pairwise covariances.
use std::fmt;

mod stats;

use stats::covariance_matrix;

/// One measured child: the calls a parent makes to one child function.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChildSlot {
    /// Slot of the parent function (`None`: the root). Always a smaller
    /// index than this slot's own.
    pub parent: Option<usize>,
    /// Display name of the child function.
    pub function: String,
    /// (call instruction address, return address) of each call site in the
    /// parent whose duration is summed into this slot.
    pub call_sites: Vec<(u64, u64)>,
}

/// Which child each column of [`Invocation::children_ns`] holds.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ChildTable {
    pub root: String,
    pub slots: Vec<ChildSlot>,
}

impl ChildTable {
    pub fn new(root: impl Into<String>) -> Self {
        Self {
            root: root.into(),
            slots: Vec::new(),
        }
    }

    /// The function chain from the root to `slot` (both included).
    pub fn path(&self, slot: Option<usize>) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = slot;
        while let Some(s) = cur {
            out.push(self.slots[s].function.clone());
            cur = self.slots[s].parent;
        }
        out.push(self.root.clone());
        out.reverse();
        out
    }
}

/// One invocation of the root: its duration and, per slot of the child
/// table, the summed duration of that slot's calls during it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Invocation {
    pub root_ns: u64,
    pub children_ns: Vec<u64>,
}

/// A function in the tree: a real one, or the imaginary `img_F` standing for
/// F's own instructions and its unmeasurable calls (Sec. 3.1).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct FnName {
    pub name: String,
    pub imaginary: bool,
}

impl FnName {
    pub fn real(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            imaginary: false,
        }
    }
    pub fn img(of: impl Into<String>) -> Self {
        Self {
            name: of.into(),
            imaginary: true,
        }
    }
}

impl fmt::Display for FnName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.imaginary {
            write!(f, "img_{}", self.name)
        } else {
            f.write_str(&self.name)
        }
    }
}

/// What a node of the variance tree stands for: the variance of one
/// function or the covariance of two (kept in sorted order, so a term is
/// also the key of its factor, Sec. 3.1).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Term {
    Var(FnName),
    Cov(FnName, FnName),
}

impl Term {
    pub fn cov(a: FnName, b: FnName) -> Self {
        if a <= b {
            Term::Cov(a, b)
        } else {
            Term::Cov(b, a)
        }
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Term::Var(a) => write!(f, "Var({a})"),
            Term::Cov(a, b) => write!(f, "Cov({a}, {b})"),
        }
    }
}

impl serde::Serialize for Term {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One node: an instance of a factor (Sec. 3.1).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Node {
    pub term: Term,
    /// The variance node this term breaks down (`None` for the root).
    pub parent: Option<usize>,
    pub children: Vec<usize>,
    /// The function whose execution the term is measured in, as the chain
    /// from the root (empty for the root node itself).
    pub context: Vec<String>,
    /// The child-table slot a measured function's variance comes from.
    pub slot: Option<usize>,
    /// Var(F), or 2·Cov(F, G): the term's whole share of eq. 1.
    pub value_ns2: f64,
    /// `value_ns2` / Var(root).
    pub share: f64,
    /// Mean duration (variance nodes only).
    pub mean_ns: Option<f64>,
    /// For `img_F`: invocations in which F's children took longer than F
    /// (E(img_F) < 0 cannot happen for calls on one thread, Sec. 3.1).
    pub negative_invocations: usize,
}

/// A variance tree computed from one round of invocations.
#[derive(Debug, Clone, serde::Serialize)]
pub struct VarianceTree {
    /// Node 0 is Var(root).
    pub nodes: Vec<Node>,
    pub invocations: usize,
}

/// Errors of the variance computation; each says what to do next.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TreeError {
    #[error(
        "only {invocations} invocation(s) of the root were recorded; variance needs at least 2: run longer (--duration) or with more load"
    )]
    TooFewInvocations { invocations: usize },
    #[error(
        "invocation {index} has {got} child durations but the child table has {expected} slots"
    )]
    WidthMismatch {
        index: usize,
        got: usize,
        expected: usize,
    },
    #[error("child slot {slot} names parent slot {parent}, which does not precede it")]
    BadParent { slot: usize, parent: usize },
    #[error(
        "the root's duration did not vary over {invocations} invocations (variance 0): there is no variance to explain"
    )]
    ZeroVariance { invocations: usize },
}

impl VarianceTree {
    /// Builds the tree of eq. 1 from one round.
    pub fn compute(table: &ChildTable, invocations: &[Invocation]) -> Result<Self, TreeError> {
        let n = invocations.len();
        if n < 2 {
            return Err(TreeError::TooFewInvocations { invocations: n });
        }
        for (i, inv) in invocations.iter().enumerate() {
            if inv.children_ns.len() != table.slots.len() {
                return Err(TreeError::WidthMismatch {
                    index: i,
                    got: inv.children_ns.len(),
                    expected: table.slots.len(),
                });
            }
        }
        for (s, slot) in table.slots.iter().enumerate() {
            if let Some(p) = slot.parent
                && p >= s
            {
                return Err(TreeError::BadParent { slot: s, parent: p });
            }
        }
        let column = |slot: Option<usize>| -> Vec<f64> {
            invocations
                .iter()
                .map(|inv| match slot {
                    None => inv.root_ns as f64,
                    Some(s) => inv.children_ns[s] as f64,
                })
                .collect()
        };
        let root_series = column(None);
        let (root_mean, root_cov) = covariance_matrix(std::slice::from_ref(&root_series));
        let root_var = root_cov[0][0];
        if root_var <= 0.0 {
            return Err(TreeError::ZeroVariance { invocations: n });
        }
        let mut tree = VarianceTree {
            nodes: vec![Node {
                term: Term::Var(FnName::real(&table.root)),
                parent: None,
                children: Vec::new(),
                context: Vec::new(),
                slot: None,
                value_ns2: root_var,
                share: 1.0,
                mean_ns: Some(root_mean[0]),
                negative_invocations: 0,
            }],
            invocations: n,
        };
        // Variance node of each slot, filled as its parent is broken down.
        let mut node_of_slot: Vec<Option<usize>> = vec![None; table.slots.len()];
        let parents = std::iter::once(None).chain((0..table.slots.len()).map(Some));
        for parent in parents {
            let kids: Vec<usize> = (0..table.slots.len())
                .filter(|&s| table.slots[s].parent == parent)
                .collect();
            if kids.is_empty() {
                continue;
            }
            let parent_node = match parent {
                None => 0,
                Some(p) => match node_of_slot[p] {
                    Some(node) => node,
                    None => continue, // its own parent was never measured
                },
            };
            let parent_name = match parent {
                None => table.root.clone(),
                Some(p) => table.slots[p].function.clone(),
            };
            let context = table.path(parent);
            let parent_series = column(parent);
            let mut series: Vec<Vec<f64>> = kids.iter().map(|&s| column(Some(s))).collect();
            // img_X = X − Σ children, per invocation (Sec. 3.1).
            let img: Vec<f64> = (0..n)
                .map(|i| parent_series[i] - series.iter().map(|c| c[i]).sum::<f64>())
                .collect();
            let negative = img.iter().filter(|&&v| v < 0.0).count();
            series.push(img);
            let mut names: Vec<FnName> = kids
                .iter()
                .map(|&s| FnName::real(&table.slots[s].function))
                .collect();
            names.push(FnName::img(&parent_name));
            let (means, cov) = covariance_matrix(&series);
            let add = |tree: &mut VarianceTree, term, slot, value: f64, mean, neg| {
                let id = tree.nodes.len();
                tree.nodes.push(Node {
                    term,
                    parent: Some(parent_node),
                    children: Vec::new(),
                    context: context.clone(),
                    slot,
                    value_ns2: value,
                    share: value / root_var,
                    mean_ns: mean,
                    negative_invocations: neg,
                });
                tree.nodes[parent_node].children.push(id);
                id
            };
            // Eq. 1: Var(ΣXi) = Σ Var(Xi) + 2 Σ_{i<j} Cov(Xi, Xj).
            for (i, name) in names.iter().enumerate() {
                let slot = kids.get(i).copied();
                let neg = if slot.is_none() { negative } else { 0 };
                let id = add(
                    &mut tree,
                    Term::Var(name.clone()),
                    slot,
                    cov[i][i],
                    Some(means[i]),
                    neg,
                );
                if let Some(s) = slot {
                    node_of_slot[s] = Some(id);
                }
            }
            for i in 0..names.len() {
                for j in i + 1..names.len() {
                    let term = Term::cov(names[i].clone(), names[j].clone());
                    add(&mut tree, term, None, 2.0 * cov[i][j], None, 0);
                }
            }
        }
        Ok(tree)
    }

    pub fn root(&self) -> &Node {
        &self.nodes[0]
    }

    /// Var(root) in ns².
    pub fn root_variance_ns2(&self) -> f64 {
        self.nodes[0].value_ns2
    }

    /// The function a variance node measures (with its context), as the
    /// chain from the root; `None` for covariance and imaginary nodes.
    pub fn instance_path(&self, node: usize) -> Option<Vec<String>> {
        let n = &self.nodes[node];
        match &n.term {
            Term::Var(f) if !f.imaginary => {
                let mut p = n.context.clone();
                p.push(f.name.clone());
                Some(p)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(parent: Option<usize>, f: &str) -> ChildSlot {
        ChildSlot {
            parent,
            function: f.into(),
            call_sites: vec![],
        }
    }

    fn inv(root: u64, kids: &[u64]) -> Invocation {
        Invocation {
            root_ns: root,
            children_ns: kids.to_vec(),
        }
    }

    fn find<'a>(t: &'a VarianceTree, term: &Term) -> &'a Node {
        t.nodes
            .iter()
            .find(|n| &n.term == term)
            .unwrap_or_else(|| panic!("{term} missing"))
    }

    /// Hand-computed eq. 1 on four invocations of X = Y + Z + img_X:
    /// Y = 1,2,3,4; Z = 2,4,6,8; img = 10,10,10,11 → X = 13,16,19,23.
    /// Var(Y) = 5/3, Var(Z) = 20/3, 2Cov(Y,Z) = 20/3, Var(img) = 1/4,
    /// 2Cov(Y,img) = 1, 2Cov(Z,img) = 2, Var(X) = 73/4 (they sum to it).
    /// Catches a wrong img_X, a missing factor 2, or covariances left out.
    #[test]
    fn eq1_on_hand_computed_example() {
        let mut table = ChildTable::new("X");
        table.slots = vec![slot(None, "Y"), slot(None, "Z")];
        let invs = vec![
            inv(13, &[1, 2]),
            inv(16, &[2, 4]),
            inv(19, &[3, 6]),
            inv(23, &[4, 8]),
        ];
        let t = VarianceTree::compute(&table, &invs).unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(t.root_variance_ns2(), 73.0 / 4.0));
        let y = FnName::real("Y");
        let z = FnName::real("Z");
        let img = FnName::img("X");
        assert!(close(find(&t, &Term::Var(y.clone())).value_ns2, 5.0 / 3.0));
        assert!(close(find(&t, &Term::Var(z.clone())).value_ns2, 20.0 / 3.0));
        assert!(close(find(&t, &Term::Var(img.clone())).value_ns2, 0.25));
        assert!(close(
            find(&t, &Term::cov(y.clone(), z.clone())).value_ns2,
            20.0 / 3.0
        ));
        assert!(close(find(&t, &Term::cov(img.clone(), y)).value_ns2, 1.0));
        assert!(close(find(&t, &Term::cov(z, img.clone())).value_ns2, 2.0));
        assert!(close(find(&t, &Term::Var(img)).mean_ns.unwrap(), 10.25));
        let sum: f64 = t.root().children.iter().map(|&c| t.nodes[c].share).sum();
        assert!(
            close(sum, 1.0),
            "shares of the root's children sum to {sum}"
        );
    }

    /// Two levels in one round: the slot of a grandchild hangs under its
    /// parent's variance node and splits it exactly. Catches grandchildren
    /// attached to the root or img computed against the wrong parent.
    #[test]
    fn second_level_breaks_down_its_parent() {
        let mut table = ChildTable::new("R");
        table.slots = vec![slot(None, "A"), slot(Some(0), "B")];
        let invs = vec![inv(10, &[6, 5]), inv(14, &[9, 7]), inv(11, &[7, 4])];
        let t = VarianceTree::compute(&table, &invs).unwrap();
        let a = find(&t, &Term::Var(FnName::real("A")));
        assert_eq!(a.context, vec!["R".to_string()]);
        let b_id = t
            .nodes
            .iter()
            .position(|n| n.term == Term::Var(FnName::real("B")))
            .unwrap();
        assert_eq!(
            t.nodes[b_id].context,
            vec!["R".to_string(), "A".to_string()]
        );
        assert_eq!(
            t.instance_path(b_id).unwrap(),
            vec!["R".to_string(), "A".into(), "B".into()]
        );
        let sum: f64 = a.children.iter().map(|&c| t.nodes[c].value_ns2).sum();
        assert!((sum - a.value_ns2).abs() < 1e-9);
        // img_A = A − B = 1, 2, 3: variance 1.
        assert!((find(&t, &Term::Var(FnName::img("A"))).value_ns2 - 1.0).abs() < 1e-12);
    }

    /// Catches silently accepting records that cannot be decomposed.
    #[test]
    fn rejects_bad_input() {
        let mut table = ChildTable::new("R");
        table.slots = vec![slot(None, "A")];
        assert_eq!(
            VarianceTree::compute(&table, &[inv(5, &[1])]).unwrap_err(),
            TreeError::TooFewInvocations { invocations: 1 }
        );
        assert!(matches!(
            VarianceTree::compute(&table, &[inv(5, &[1]), inv(6, &[])]),
            Err(TreeError::WidthMismatch { index: 1, .. })
        ));
        assert_eq!(
            VarianceTree::compute(&table, &[inv(5, &[1]), inv(5, &[2])]).unwrap_err(),
            TreeError::ZeroVariance { invocations: 2 }
        );
        table.slots = vec![slot(Some(0), "A")];
        assert!(matches!(
            VarianceTree::compute(&table, &[inv(5, &[1]), inv(6, &[1])]),
            Err(TreeError::BadParent { slot: 0, parent: 0 })
        ));
    }

    /// A child longer than its parent makes img negative: counted, not
    /// clamped (clamping would break eq. 1). Catches the sanity check
    /// going silent.
    #[test]
    fn counts_negative_img() {
        let mut table = ChildTable::new("R");
        table.slots = vec![slot(None, "A")];
        let t = VarianceTree::compute(&table, &[inv(5, &[6]), inv(9, &[2]), inv(7, &[3])]).unwrap();
        assert_eq!(
            find(&t, &Term::Var(FnName::img("R"))).negative_invocations,
            1
        );
    }
}
