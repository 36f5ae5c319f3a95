//! From a child table to the uprobes that measure it: file offsets of the
//! root function and of every call site and return site, with the cookies
//! ([`ttp_common::vprof::cookie`]) the probe programs read; and from the
//! probes' records back to [`Invocation`]s.
//!
//! Uprobes attach at file offsets, so the same plan works for a PIE, a
//! non-PIE executable and a shared library, wherever it is mapped.
use std::path::PathBuf;

use ttp_common::vprof::{self, MAX_SITES, MAX_SLOTS, PARENT_ROOT, Record};

use super::{
    elf::ElfImage,
    tree::{ChildTable, Invocation},
};

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
    pub fn cookie(&self) -> u64 {
        let call_len = (self.return_address - self.call_address) as u32;
        vprof::cookie(self.site, call_len, self.parent, self.slot)
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

    /// The invocation a probe record describes (its first `slots` columns).
    pub fn invocation(&self, record: &Record) -> Invocation {
        Invocation {
            root_ns: record.root_ns,
            children_ns: record.children_ns[..self.slots.min(MAX_SLOTS)].to_vec(),
        }
    }
}
