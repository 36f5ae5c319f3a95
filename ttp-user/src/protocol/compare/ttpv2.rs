//! What `compare` takes from TTPv2 results: `ttp.run/1` (one Q@C) and
//! `ttp.analyze/1` (several Q@Cs, also what a study file of `experiment`
//! becomes once analysed). The samples are the QEs TTPv2 retained: Step 2
//! kept the QE and Step 3 kept its Q@C (Sec. 8.3–8.5).
use std::collections::BTreeMap;

use super::input::{InputError, Measure, Side, TTPV2_MEASURES};
use crate::collect::machine::MachineFacts;
use crate::protocol::ttpv2::analysis::{AnalyzeDocument, QcDocument, RunDocument};

/// The retained QEs' measures of one Q@C, each name prefixed by `prefix`.
fn qc_measures(qc: &QcDocument, prefix: &str) -> (Vec<Measure>, usize) {
    let kept: Vec<_> = if qc.result.dropped_reason.is_some() {
        Vec::new()
    } else {
        qc.qes.iter().filter(|e| e.dropped_by.is_empty()).collect()
    };
    let samples: [Vec<f64>; 3] = [
        kept.iter().filter_map(|e| e.calc.time_calc_ms).collect(),
        kept.iter().filter_map(|e| e.calc.time_exact_ms).collect(),
        kept.iter().map(|e| e.record.time_meas_ms).collect(),
    ];
    let measures = TTPV2_MEASURES
        .iter()
        .zip(samples)
        .map(|(s, x)| {
            let mut m = Measure::of(s, x, "QEs");
            m.name = format!("{prefix}{}", m.name);
            m
        })
        .collect();
    (measures, kept.len())
}

fn too_few(qc: &QcDocument, retained: usize) -> InputError {
    InputError::TooFew {
        retained,
        unit: "QE(s)",
        why: match &qc.result.dropped_reason {
            Some(reason) => format!(" (the Q@C was dropped: {reason})"),
            None => String::new(),
        },
    }
}

fn setup_of(
    schema: &str,
    machine: Option<&MachineFacts>,
    qc: Option<&QcDocument>,
) -> BTreeMap<&'static str, String> {
    let mut setup = machine_setup(machine);
    setup.insert("schema", schema.to_string());
    if let Some(qc) = qc {
        setup.insert("USER_HZ (setup)", qc.setup.user_hz.to_string());
        setup.insert("CPUs (setup)", qc.setup.cpus.to_string());
        if let Some(q) = &qc.setup.query_process {
            setup.insert("query process", q.clone());
        }
    }
    setup
}

pub fn run_side(d: RunDocument) -> Result<Side, InputError> {
    let (measures, retained) = qc_measures(&d.qc, "");
    if retained < 2 {
        return Err(too_few(&d.qc, retained));
    }
    Ok(Side {
        schema: d.schema.clone(),
        title: d.qc.title(),
        retained,
        measures,
        whole_run: Vec::new(),
        setup: setup_of(&d.schema, d.machine.as_ref(), Some(&d.qc)),
    })
}

/// Several Q@Cs: each measure is named after its Q@C's labels
/// (`cardinality=1000: time_calc_ms`), so the Q@Cs of two analyses are
/// matched by their labels; a Q@C without labels is named after its
/// source file, which matches only when there is one Q@C.
pub fn analyze_side(d: AnalyzeDocument) -> Result<Side, InputError> {
    let mut measures = Vec::new();
    let mut retained = 0;
    let single = d.qcs.len() == 1;
    for qc in &d.qcs {
        let prefix = if single && qc.labels.is_empty() {
            String::new()
        } else {
            format!("{}: ", qc.name())
        };
        let (ms, n) = qc_measures(qc, &prefix);
        measures.extend(ms);
        retained += n;
    }
    if d.qcs.iter().all(|qc| qc.result.retained < 2) {
        return Err(match d.qcs.first() {
            Some(qc) if single => too_few(qc, qc.result.retained),
            _ => InputError::TooFew {
                retained: 0,
                unit: "QE(s)",
                why: format!(" in every one of {} Q@C(s)", d.qcs.len()),
            },
        });
    }
    let title = match d.qcs.first() {
        Some(qc) if single => qc.title(),
        _ => format!("{} Q@Cs", d.qcs.len()),
    };
    // Set-up facts of the first Q@C: `analyze` applies one set-up to all.
    Ok(Side {
        schema: d.schema.clone(),
        title,
        retained,
        measures,
        whole_run: Vec::new(),
        setup: setup_of(&d.schema, d.machine.as_ref(), d.qcs.first()),
    })
}

/// The machine facts two results must share.
fn machine_setup(m: Option<&MachineFacts>) -> BTreeMap<&'static str, String> {
    let mut s = BTreeMap::new();
    let Some(m) = m else {
        s.insert("machine facts", "not recorded".to_string());
        return s;
    };
    let mut put = |k: &'static str, v: Option<String>| {
        if let Some(v) = v {
            s.insert(k, v);
        }
    };
    put("CPU model", m.cpu_model.clone());
    put("cores", m.cores.map(|v| v.to_string()));
    put("memory bytes", m.memory_bytes.map(|v| v.to_string()));
    put("disk", m.disk.clone());
    put("OS", m.os.clone());
    put("kernel", m.kernel.clone());
    put("CONFIG_HZ", m.config_hz.map(|v| v.to_string()));
    put("virtualization", m.virtualization.clone());
    put("tool", m.tool.clone());
    put(
        "cache",
        m.cold_cache
            .map(|c| if c { "cold" } else { "warm" }.to_string()),
    );
    s
}
