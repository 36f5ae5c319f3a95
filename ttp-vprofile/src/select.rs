//! Factors, specificity, responsibility and factor selection (Sec. 3.2,
//! eq. 2–3, Algorithm 1).
//!
//! A factor is the variance of a function, or the covariance of two, over a
//! whole root invocation; the tree's nodes are its instances, one per
//! calling context (Sec. 3.1). A factor's contribution is the sum of its
//! instances' values (Algorithm 1, lines 1–10).
use std::collections::{BTreeMap, HashSet};

use ttp_variance::{FnName, Term, VarianceTree};

/// What Algorithm 2 changes in the tree before a selection.
#[derive(Debug, Clone, Default)]
pub(crate) struct Adjustments {
    /// Variance instances (by path from the root) whose contribution is set
    /// to 0 because one of their children explains at least the
    /// `min_child_share` of them (Algorithm 2, lines 13–14).
    pub zeroed: HashSet<Vec<String>>,
    /// Factors whose contribution counts as infinite in the ranking: found
    /// to explain their own variance (Algorithm 2, lines 28–30).
    pub pinned: HashSet<Term>,
}

/// One factor with its ranking (Algorithm 1, lines 11–14).
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Factor {
    pub term: Term,
    /// Node ids of its instances in the tree.
    pub instances: Vec<usize>,
    /// Σ contri(N_i) (eq. 3), zeroed instances counting 0.
    pub contribution_ns2: f64,
    /// `contribution_ns2` / Var(root).
    pub share: f64,
    /// height(N): the function's height, the larger one for a covariance;
    /// height(F) − 1 for `img_F`.
    pub height: u32,
    /// speci(N) = (height(call_graph) − height(N))³ (eq. 2).
    pub specificity: f64,
    /// resp(N) = speci(N) · Σ contri(N_i) (eq. 3), in ns².
    pub responsibility: f64,
    pub pinned: bool,
}

/// Groups the tree's nodes into factors and ranks them by responsibility,
/// highest first (pinned factors first of all).
pub(crate) fn factors(
    tree: &VarianceTree,
    height: &dyn Fn(&str) -> u32,
    root_height: u32,
    adjustments: &Adjustments,
) -> Vec<Factor> {
    // img_F is F's own code: drawn as F's leaf child in the static call
    // graph (Fig. 3), it is placed one level below F, no more specific than
    // F's children. (A height of 0 would make every img_F the most specific
    // factor of a tall graph and, with line 21's break, hide every real
    // function behind a negligible img.)
    let fn_height = |f: &FnName| {
        if f.imaginary {
            height(&f.name).saturating_sub(1)
        } else {
            height(&f.name)
        }
    };
    let root_var = tree.root_variance_ns2();
    // Algorithm 1, lines 1–10: one entry per factor, instances summed.
    let mut by_term: BTreeMap<Term, Factor> = BTreeMap::new();
    for (id, node) in tree.nodes.iter().enumerate() {
        let zeroed = tree
            .instance_path(id)
            .is_some_and(|p| adjustments.zeroed.contains(&p));
        let contri = if zeroed { 0.0 } else { node.value_ns2 };
        let f = by_term.entry(node.term.clone()).or_insert_with(|| {
            let h = match &node.term {
                Term::Var(a) => fn_height(a),
                Term::Cov(a, b) => fn_height(a).max(fn_height(b)),
            };
            let speci = f64::from(root_height.saturating_sub(h)).powi(3);
            Factor {
                term: node.term.clone(),
                instances: Vec::new(),
                contribution_ns2: 0.0,
                share: 0.0,
                height: h,
                specificity: speci,
                responsibility: 0.0,
                pinned: adjustments.pinned.contains(&node.term),
            }
        });
        f.instances.push(id);
        f.contribution_ns2 += contri;
    }
    // Lines 11–13: resp = speci · contri (eq. 3).
    let mut out: Vec<Factor> = by_term
        .into_values()
        .map(|mut f| {
            f.share = f.contribution_ns2 / root_var;
            f.responsibility = f.specificity * f.contribution_ns2;
            f
        })
        .collect();
    out.sort_by(rank_order);
    out
}

/// Line 14: descending responsibility, with pinned (contri = ∞) factors
/// ahead of every other; ties by contribution, then name.
pub(crate) fn rank_order(a: &Factor, b: &Factor) -> std::cmp::Ordering {
    b.pinned
        .cmp(&a.pinned)
        .then(b.responsibility.total_cmp(&a.responsibility))
        .then(b.contribution_ns2.total_cmp(&a.contribution_ns2))
        .then(a.term.cmp(&b.term))
}

/// Algorithm 1, lines 15–23, as ttp reads it: the k most responsible of
/// the factors whose contribution is at least `threshold_share` of
/// Var(root) (kept factors always qualify; factors of specificity 0, the
/// root's own variance, never do). Returns indices into `ranked`.
///
/// The paper's prose says "select the ones with a total contribution ≥ d
/// from the first k"; its pseudocode stops at the first factor under d
/// (line 21, [`select_literal`]). Ranking first and thresholding after
/// makes the answer hinge on negligible factors: a leaf with 0.1 % of the
/// variance and a large specificity (eq. 2, cubed heights) outranks a
/// function explaining 80 %, and the `break` then returns nothing, or
/// something else on the next run as noise reorders the negligible ones.
/// Applying d before taking the k most responsible keeps eq. 3's preference
/// for specific functions among the factors that matter, and only those
/// (docs/vprofile.md, "Which reading of Algorithm 1").
pub(crate) fn select(ranked: &[Factor], k: usize, threshold_share: f64) -> Vec<usize> {
    ranked
        .iter()
        .enumerate()
        // The root and anything as high (specificity 0, eq. 2) tell nothing
        // about the cause (Sec. 3.2, "dispatch_command contributes 100 %").
        .filter(|(_, f)| f.specificity > 0.0 && (f.pinned || f.share >= threshold_share))
        .take(k)
        .map(|(i, _)| i)
        .collect()
}

/// Algorithm 1, lines 15–23, as printed: of the first `k` factors by
/// responsibility, those whose contribution is at least `threshold_share`
/// of Var(root), stopping at the first that is not (line 21). Reported
/// beside [`select`]'s answer, not used to drive the breakdown.
pub(crate) fn select_literal(ranked: &[Factor], k: usize, threshold_share: f64) -> Vec<usize> {
    let mut s = Vec::new();
    for (i, f) in ranked.iter().take(k).enumerate() {
        if f.pinned || f.share >= threshold_share {
            s.push(i);
        } else {
            break;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttp_variance::{ChildSlot, ChildTable, Invocation};

    /// The tree of Fig. 3: X calls Y and Z, Z calls Y. Var(Y) has two
    /// instances whose contributions add up into one factor.
    fn fig3() -> VarianceTree {
        let slot = |parent, f: &str| ChildSlot {
            parent,
            function: f.into(),
            call_sites: vec![],
        };
        let mut table = ChildTable::new("X");
        table.slots = vec![slot(None, "Y"), slot(None, "Z"), slot(Some(1), "Y")];
        // X = Y + Z + 1·i, Z = Y' + 2 (constant img_Z).
        let rows = [(3u64, 5u64, 3u64), (1, 9, 7), (4, 4, 2), (2, 6, 4)];
        let invs: Vec<Invocation> = rows
            .iter()
            .enumerate()
            .map(|(i, &(y, z, y2))| Invocation {
                root_ns: y + z + i as u64,
                children_ns: vec![y, z, y2],
            })
            .collect();
        VarianceTree::compute(&table, &invs).unwrap()
    }

    fn heights(f: &str) -> u32 {
        match f {
            "X" => 2,
            "Z" => 1,
            _ => 0,
        }
    }

    /// Hand-computed: Var(Y) = 5/3 at X, Var(Y') = 14/3 under Z, so the
    /// factor Var(Y) is 19/3 with speci (2 − 0)³ = 8 and resp 152/3.
    /// Catches instances not summed into their factor, or eq. 2 with the
    /// wrong exponent.
    #[test]
    fn factor_sums_instances_and_applies_eq_2_3() {
        let t = fig3();
        let f = factors(&t, &heights, 2, &Adjustments::default());
        let y = f
            .iter()
            .find(|f| f.term == Term::Var(FnName::real("Y")))
            .unwrap();
        assert_eq!(y.instances.len(), 2);
        assert!(
            (y.contribution_ns2 - 19.0 / 3.0).abs() < 1e-9,
            "{}",
            y.contribution_ns2
        );
        assert_eq!(y.specificity, 8.0);
        assert!((y.responsibility - 152.0 / 3.0).abs() < 1e-9);
        let z = f
            .iter()
            .find(|f| f.term == Term::Var(FnName::real("Z")))
            .unwrap();
        assert_eq!(z.specificity, 1.0, "(2 − 1)³");
        let x = f
            .iter()
            .find(|f| f.term == Term::Var(FnName::real("X")))
            .unwrap();
        assert_eq!(x.responsibility, 0.0, "the root is never specific");
        let img_x = f
            .iter()
            .find(|f| f.term == Term::Var(FnName::img("X")))
            .unwrap();
        assert_eq!(img_x.height, 1, "img_X sits one level below X");
        assert_eq!(img_x.specificity, 1.0);
        assert!(
            f.windows(2)
                .all(|w| w[0].responsibility >= w[1].responsibility)
        );
    }

    /// The literal Algorithm 1 stops at the first factor under the
    /// threshold even if a later one is above it, and takes at most k; ttp's
    /// reading skips the factors under the threshold and takes the k most
    /// responsible of the rest. Zeroed instances drop out and pinned
    /// factors rank first. Catches `continue` instead of `break` in the
    /// literal reading (line 21), a threshold ignored by ttp's, and
    /// adjustments that are ignored.
    #[test]
    fn selection_breaks_at_threshold_and_honours_adjustments() {
        let t = fig3();
        let ranked = factors(&t, &heights, 2, &Adjustments::default());
        let shares: Vec<f64> = ranked.iter().map(|f| f.share).collect();
        let first_low = shares.iter().position(|&s| s < 0.3).unwrap();
        let sel = select_literal(&ranked, 10, 0.3);
        assert_eq!(sel, (0..first_low).collect::<Vec<_>>());
        assert!(select_literal(&ranked, 1, 0.0).len() == 1);
        let above: Vec<usize> = (0..ranked.len())
            .filter(|&i| shares[i] >= 0.3 && ranked[i].specificity > 0.0)
            .collect();
        assert_eq!(select(&ranked, 10, 0.3), above);
        assert_eq!(select(&ranked, 1, 0.3), above[..1]);
        // A factor above the threshold after one below it: the literal
        // reading stops before it, ttp's takes it.
        let split = vec![mk("A", 0.5, 1), mk("B", 0.01, 0), mk("C", 0.4, 1)];
        assert_eq!(select_literal(&split, 3, 0.05), [0]);
        assert_eq!(select(&split, 3, 0.05), [0, 2]);
        assert_eq!(select(&split, 1, 0.05), [0]);

        let mut adj = Adjustments::default();
        adj.zeroed.insert(vec!["X".into(), "Z".into(), "Y".into()]);
        adj.pinned.insert(Term::Var(FnName::real("Z")));
        let ranked = factors(&t, &heights, 2, &adj);
        assert_eq!(ranked[0].term, Term::Var(FnName::real("Z")));
        let y = ranked
            .iter()
            .find(|f| f.term == Term::Var(FnName::real("Y")))
            .unwrap();
        assert!(
            (y.contribution_ns2 - 5.0 / 3.0).abs() < 1e-9,
            "zeroed instance still counted"
        );
    }

    /// A factor of a graph 30 high, with Var(root) = 1.
    fn mk(name: &str, share: f64, height: u32) -> Factor {
        let speci = f64::from(30 - height).powi(3);
        Factor {
            term: Term::Var(FnName::real(name)),
            instances: vec![],
            contribution_ns2: share,
            share,
            height,
            specificity: speci,
            responsibility: speci * share,
            pinned: false,
        }
    }

    /// The PostgreSQL case of docs/vprofile.md: a function with 80 % of
    /// Var(root) at height 1, and two leaves (height 0 in a tall graph) with
    /// 0.1 % each. By responsibility the leaves come first; the literal
    /// Algorithm 1 then selects nothing, ttp's reading the function.
    /// Catches the threshold applied after the ranking again.
    #[test]
    fn negligible_specific_leaves_do_not_hide_the_answer() {
        let mut ranked = vec![
            mk("MarkPortalDone", 0.001, 0),
            mk("MarkPortalActive", 0.001, 0),
            mk("sub_475d50", 0.81, 27),
            mk("img_PortalRun", 0.06, 28),
        ];
        ranked.sort_by(rank_order);
        assert_eq!(ranked[0].term.to_string(), "Var(MarkPortalActive)");
        assert!(select_literal(&ranked, 3, 0.05).is_empty());
        let picked: Vec<String> = select(&ranked, 3, 0.05)
            .iter()
            .map(|&i| ranked[i].term.to_string())
            .collect();
        assert_eq!(picked, ["Var(sub_475d50)", "Var(img_PortalRun)"]);
    }
}
