//! A hand-built call graph with constructed durations, so every number of
//! Algorithm 2 and of its outputs is known in advance (algorithm2_tests.rs
//! here, report/vprofile/tests.rs).
use std::collections::HashMap;

use super::{
    breakdown::{Breakdown, BreakdownConfig, CallGraphView},
    callgraph::{Child, ChildKey},
    document::{BinaryInfo, MeasurementInfo, VprofileReport},
    elf::ElfKind,
};
use ttp_ledger::probe::symbols::SymbolSource;
use ttp_variance::{ChildTable, Invocation};

/// R calls A and B; A calls C and D. Heights: C, D, B = 0; A = 1; R = 2.
pub struct Fake(HashMap<&'static str, Vec<&'static str>>);

impl Default for Fake {
    fn default() -> Self {
        Self(HashMap::from([
            ("R", vec!["A", "B"]),
            ("A", vec!["C", "D"]),
        ]))
    }
}

impl CallGraphView for Fake {
    fn root_height(&self) -> u32 {
        2
    }
    fn height(&self, f: &str) -> u32 {
        match f {
            "R" => 2,
            "A" => 1,
            _ => 0,
        }
    }
    fn children(&self, f: &str) -> Vec<Child> {
        self.0
            .get(f)
            .map(|cs| {
                cs.iter()
                    .enumerate()
                    .map(|(i, c)| Child {
                        key: ChildKey::Import((*c).into()),
                        name: (*c).into(),
                        call_sites: vec![(0x100 + i as u64 * 8, 0x105 + i as u64 * 8)],
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Durations (ns) of 8 invocations: C carries almost all of the variance;
/// D, B and the bodies are nearly constant.
pub(crate) fn invocations(table: &ChildTable) -> Vec<Invocation> {
    invocations_with(table, [100, 900, 300, 700, 200, 800, 400, 600])
}

/// The same 8 invocations with C's durations `c`: A = C + D + 10, the root
/// A + B + 5.
pub fn invocations_with(table: &ChildTable, c: [u64; 8]) -> Vec<Invocation> {
    (0..8)
        .map(|i| {
            let d = 50 + (i as u64 % 2);
            let a = c[i] + d + 10;
            let b = 40 + (i as u64 % 3);
            let col = |f: &str| match f {
                "A" => a,
                "B" => b,
                "C" => c[i],
                "D" => d,
                _ => unreachable!(),
            };
            Invocation {
                root_ns: a + b + 5,
                children_ns: table.slots.iter().map(|s| col(&s.function)).collect(),
            }
        })
        .collect()
}

pub fn run(config: BreakdownConfig) -> Breakdown {
    let g = Fake::default();
    let mut b = Breakdown::new("R", config);
    while let Some(table) = b.next_table(&g) {
        let inv = invocations(table);
        b.observe(&inv, &g).unwrap();
    }
    b
}

pub const CONFIG: BreakdownConfig = BreakdownConfig {
    k: 2,
    threshold_share: 0.05,
    min_child_share: 0.8,
    max_rounds: 5,
};

pub fn report(b: &Breakdown) -> VprofileReport {
    VprofileReport::new(
        b,
        BinaryInfo {
            path: "/bin/fake".into(),
            kind: ElfKind::PieExecutable,
            symbols: SymbolSource::Symtab,
            symbol_file: None,
            root_height: 2,
            reachable_functions: 5,
        },
        MeasurementInfo::default(),
    )
    .unwrap()
}
