//! The blame graph (iQCAR Sec. 4.1, the iQC-Graph, adapted to one host):
//!
//! ```text
//! group → process → thread → unit (CPU / device / memory) → resource → victim
//! [unknown] ───────────────→ unit
//! ```
//!
//! Edges point from cause to effect and carry the blame that flows along
//! them (ns of the victim's blocked time); a node's Blame Contribution BC is
//! the blame it passes on (causes) or receives (victim side). The unknown
//! cause is short-circuited from the top level to the units, as the paper
//! does for External-IO and Unknown (Fig. 6).
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    attribute::{Attribution, UnitKey},
    cause::{Classifier, UNKNOWN},
};
use ttp_window::window::blame_record::{CauseKind, Resource};

/// Level of a node. Paper levels (Sec. 4.1): victim = Level-0 (the victim
/// query; its stages, Level-1, collapse into it), resource = Level-2,
/// unit = Level-3 (the host), thread = Level-4 (the task linking cause to
/// effect), process = Level-5, group = Level-6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Victim,
    Resource,
    Unit,
    Thread,
    Process,
    Group,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub id: String,
    pub level: Level,
    /// Cause category (culprit side only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<CauseKind>,
    pub label: String,
    /// Blame Contribution BC (Sec. 4.1), ns of the victim's blocked time.
    pub blame_ns: f64,
    /// Degree of Responsibility (Sec. 4.2), in [0, 1].
    pub dor: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    pub from: String,
    pub to: String,
    /// Blame flowing from cause to effect along this edge, ns.
    pub blame_ns: f64,
    /// Impact Factor (Sec. 4.2): on the victim side (into a unit, resource
    /// or the victim) the share of the target's BC that comes through this
    /// edge; on the culprit side (group → process → thread) the share of the
    /// source's BC that goes through it.
    pub impact_factor: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
}

pub(crate) const VICTIM_ID: &str = "victim";

pub(crate) fn resource_id(r: Resource) -> String {
    format!("resource:{}", r.name())
}

pub(crate) fn unit_id(u: &UnitKey) -> String {
    format!("unit:{}:{}", u.resource.name(), u.unit)
}

pub(crate) fn process_id(pid: u32) -> String {
    format!("process:{pid}")
}

pub(crate) fn group_id(name: &str) -> String {
    format!("group:{name}")
}

#[derive(Default)]
struct Builder {
    index: BTreeMap<String, usize>,
    nodes: Vec<Node>,
    flows: BTreeMap<(usize, usize), f64>,
}

impl Builder {
    fn node(&mut self, id: String, level: Level, kind: Option<CauseKind>, label: String) -> usize {
        if let Some(&i) = self.index.get(&id) {
            return i;
        }
        let i = self.nodes.len();
        self.index.insert(id.clone(), i);
        self.nodes.push(Node {
            id,
            level,
            kind,
            label,
            blame_ns: 0.0,
            dor: 0.0,
        });
        i
    }

    fn flow(&mut self, from: usize, to: usize, ns: f64) {
        *self.flows.entry((from, to)).or_insert(0.0) += ns;
    }
}

/// Builds the graph from the attribution and computes BC, IF and DOR.
pub fn build(attr: &Attribution, cls: &Classifier, victim_label: &str) -> Graph {
    let mut b = Builder::default();
    let victim = b.node(VICTIM_ID.into(), Level::Victim, None, victim_label.into());
    for row in &attr.rows {
        let r = row.unit.resource;
        let res = b.node(resource_id(r), Level::Resource, None, r.name().into());
        let unit = b.node(unit_id(&row.unit), Level::Unit, None, row.unit.unit.clone());
        // Level-3 → 2 → 0 aggregation (Sec. 4.1): BT sums per unit and
        // resource.
        b.flow(unit, res, row.blocked_ns as f64);
        b.flow(res, victim, row.blocked_ns as f64);
        for s in &row.shares {
            if s.blame_ns <= 0.0 {
                continue;
            }
            let Some(task) = s.task.and_then(|t| cls.task(t)) else {
                let unknown = b.node(
                    group_id(UNKNOWN),
                    Level::Group,
                    Some(CauseKind::Unknown),
                    UNKNOWN.into(),
                );
                b.flow(unknown, unit, s.blame_ns);
                continue;
            };
            let thread = b.node(
                format!("thread:{}", task.id),
                Level::Thread,
                Some(s.kind),
                format!("{} tid {}", task.comm, task.tid),
            );
            let process = b.node(
                process_id(task.pid),
                Level::Process,
                Some(s.kind),
                format!("{} pid {}", task.process_name(), task.pid),
            );
            let gname = cls.group(task.id);
            let group = b.node(group_id(&gname), Level::Group, Some(s.kind), gname);
            // Levels 4 → 5 → 6 (Sec. 4.1): BC of a culprit is the sum of
            // what its parts caused.
            b.flow(thread, unit, s.blame_ns);
            b.flow(process, thread, s.blame_ns);
            b.flow(group, process, s.blame_ns);
        }
    }
    finish(b)
}

fn finish(b: Builder) -> Graph {
    let Builder {
        mut nodes, flows, ..
    } = b;
    let n = nodes.len();
    let mut inflow = vec![0.0; n];
    let mut outflow = vec![0.0; n];
    for (&(f, t), &ns) in &flows {
        outflow[f] += ns;
        inflow[t] += ns;
    }
    for (i, node) in nodes.iter_mut().enumerate() {
        node.blame_ns = if node.level == Level::Victim {
            inflow[i]
        } else {
            outflow[i]
        };
    }
    // DOR (Sec. 4.2): sum over all paths to the victim of the product of the
    // victim-side weights flow/BC_target, computed in one pass from the
    // victim outward (edges always go from a higher level to a lower one).
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| nodes[i].level);
    let mut out_edges: Vec<Vec<(usize, f64)>> = vec![Vec::new(); n];
    for (&(f, t), &ns) in &flows {
        out_edges[f].push((t, ns));
    }
    let mut dor = vec![0.0; n];
    for &i in &order {
        if nodes[i].level == Level::Victim {
            dor[i] = if nodes[i].blame_ns > 0.0 { 1.0 } else { 0.0 };
            continue;
        }
        dor[i] = out_edges[i]
            .iter()
            .map(|&(t, ns)| ratio(ns, nodes[t].blame_ns) * dor[t])
            .sum();
    }
    for (node, d) in nodes.iter_mut().zip(dor) {
        node.dor = d;
    }
    let edges = flows
        .iter()
        .map(|(&(f, t), &ns)| {
            let culprit_side = nodes[t].level >= Level::Thread;
            Edge {
                from: nodes[f].id.clone(),
                to: nodes[t].id.clone(),
                blame_ns: ns,
                impact_factor: if culprit_side {
                    ratio(ns, nodes[f].blame_ns)
                } else {
                    ratio(ns, nodes[t].blame_ns)
                },
            }
        })
        .collect();
    Graph { nodes, edges }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

impl Graph {
    pub(crate) fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }
}
