//! From a child table to the uprobes that measure it: file offsets of the
//! root function and of every call site and return site, with the cookies
//! ([`ttp_common::vprofile::cookie`]) the probe programs read; and from the
//! probes' records back to [`Invocation`]s.
//!
//! Uprobes attach at file offsets, so the same plan works for a PIE, a
//! non-PIE executable and a shared library, wherever it is mapped.
use std::path::PathBuf;

use ttp_common::vprofile::{self, MAX_SITES, MAX_SLOTS, PARENT_ROOT, Record};

use super::elf::ElfImage;
use ttp_variance::{ChildTable, Invocation};

/// One measured call site.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SiteProbe {
    pub site: u32,
    pub slot: u32,
    /// Parent slot, or [`PARENT_ROOT`].
    pub parent: u32,
    pub call_address: u64,
    pub return_address: u64,
    /// File offset of the `call` instruction (uprobe: the call starts).
    pub call_offset: u64,
    /// File offset of the instruction after it (uprobe: the call returned).
    pub return_offset: u64,
}

impl SiteProbe {
    /// The attachment cookie of both probes of this site.
    pub(crate) fn cookie(&self) -> u64 {
        let call_len = (self.return_address - self.call_address) as u32;
        vprofile::cookie(self.site, call_len, self.parent, self.slot)
    }
}

/// The probes of one measurement round.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProbePlan {
    pub binary: PathBuf,
    pub root: String,
    /// File offset of the root's first instruction (uprobe and uretprobe).
    pub root_offset: u64,
    pub slots: usize,
    pub sites: Vec<SiteProbe>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlanError {
    #[error(
        "the variance tree needs {slots} child slots but the probes carry at most {max}: lower --k or --rounds, or break down fewer functions"
    )]
    TooManySlots { slots: usize, max: usize },
    #[error(
        "the plan has {sites} call sites but cookies can name at most {max}: break down fewer functions"
    )]
    TooManySites { sites: usize, max: usize },
    #[error(
        "address {address:#x} is not in a loadable segment of {binary}: cannot place a uprobe there"
    )]
    NoFileOffset { address: u64, binary: PathBuf },
}

impl ProbePlan {
    /// The probes measuring `table` for the root function `root`.
    pub fn new(elf: &ElfImage, root: usize, table: &ChildTable) -> Result<Self, PlanError> {
        if table.slots.len() > MAX_SLOTS {
            return Err(PlanError::TooManySlots {
                slots: table.slots.len(),
                max: MAX_SLOTS,
            });
        }
        let offset = |address: u64| {
            elf.file_offset(address)
                .ok_or_else(|| PlanError::NoFileOffset {
                    address,
                    binary: elf.path().to_owned(),
                })
        };
        let mut sites = Vec::new();
        for (slot, s) in table.slots.iter().enumerate() {
            for &(call_address, return_address) in &s.call_sites {
                sites.push(SiteProbe {
                    site: sites.len() as u32,
                    slot: slot as u32,
                    parent: s.parent.map_or(PARENT_ROOT, |p| p as u32),
                    call_address,
                    return_address,
                    call_offset: offset(call_address)?,
                    return_offset: offset(return_address)?,
                });
            }
        }
        if sites.len() > MAX_SITES as usize {
            return Err(PlanError::TooManySites {
                sites: sites.len(),
                max: MAX_SITES as usize,
            });
        }
        Ok(Self {
            binary: elf.path().to_owned(),
            root: table.root.clone(),
            root_offset: offset(elf.functions()[root].address)?,
            slots: table.slots.len(),
            sites,
        })
    }

    /// The invocation a probe record describes (its first `slots` columns),
    /// as the probes timed it.
    pub(crate) fn invocation(&self, record: &Record) -> Invocation {
        Invocation {
            root_ns: record.root_ns,
            children_ns: record.children_ns[..self.slots.min(MAX_SLOTS)].to_vec(),
        }
    }

    /// The invocation with the probes' own cost taken out of every
    /// interval (see [`ProbeCost`]), and the ns taken out of the root.
    pub(crate) fn corrected_invocation(
        &self,
        record: &Record,
        cost: &ProbeCost,
    ) -> (Invocation, f64) {
        let n = self.slots.min(MAX_SLOTS);
        let root_cut = cost.root_overhead_ns(record.root_hits);
        let children_ns = record.children_ns[..n]
            .iter()
            .zip(&record.children_hits[..n])
            .map(|(&ns, &hits)| cost.subtract(ns, cost.child_overhead_ns(hits)))
            .collect();
        (
            Invocation {
                root_ns: cost.subtract(record.root_ns, root_cut),
                children_ns,
            },
            root_cut.min(record.root_ns as f64),
        )
    }
}

/// What one probe hit adds to the intervals the probes measure, calibrated
/// on a function of ttp's own whose bare duration is known
/// (`uprobe::calibrate`). VProfiler subtracts its own instrumentation
/// cost from what it reports; so does ttp.
///
/// A measured interval (the root, or one call of a child) starts at the
/// timestamp of one probe and ends at that of another. It contains the rest
/// of the opening probe (its return to the program), every probe hit inside
/// (trap, program, return: `per_hit_ns` each) and the start of the closing
/// probe: `boundary_ns` for the root, whose closing probe is the return
/// probe's trampoline, `call_boundary_ns` for a call. A slot's record counts
/// its calls and the hits inside them together, so each unit of it is
/// charged `call_boundary_ns`; the difference from `per_hit_ns` is part of
/// `uncertainty_per_hit_ns`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProbeCost {
    /// Cost of one probe hit inside a measured interval, ns.
    pub per_hit_ns: f64,
    /// What the root's entry and return probes add to an interval with no
    /// hit inside, ns.
    pub boundary_ns: f64,
    /// What a call site's probe and its return site's add to one call, ns.
    pub call_boundary_ns: f64,
    /// Residual uncertainty of the subtraction per hit unit, ns: how far the
    /// calibration's two call counts disagree with one linear cost, and the
    /// difference between the root's boundary and one hit.
    pub uncertainty_per_hit_ns: f64,
}

impl ProbeCost {
    /// Overhead in the root's interval; `units` = hits inside + 1
    /// (`Record::root_hits`).
    pub fn root_overhead_ns(&self, units: u32) -> f64 {
        self.boundary_ns + self.per_hit_ns * f64::from(units.saturating_sub(1))
    }
    /// Overhead in a slot's calls; `units` = Σ over its calls of (hits
    /// inside + 1) (`Record::children_hits`).
    pub(crate) fn child_overhead_ns(&self, units: u32) -> f64 {
        self.call_boundary_ns * f64::from(units)
    }
    /// Uncertainty of the overhead removed from an interval of `units`.
    pub fn uncertainty_ns(&self, units: u32) -> f64 {
        self.uncertainty_per_hit_ns * f64::from(units)
    }
    /// `ns` less `overhead`, never below 0.
    pub(crate) fn subtract(&self, ns: u64, overhead: f64) -> u64 {
        (ns as f64 - overhead.max(0.0)).max(0.0).round() as u64
    }
}
