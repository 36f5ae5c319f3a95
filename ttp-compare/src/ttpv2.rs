//! What `compare` takes from TTPv2 results: `ttp.run/1` (one Q@C) and
//! `ttp.analyze/1` (several Q@Cs, also what a study file of `experiment`
//! becomes once analysed). The samples are the QEs TTPv2 retained: Step 2
//! kept the QE and Step 3 kept its Q@C (Sec. 8.3–8.5).
use std::collections::BTreeMap;

use super::input::{InputError, Measure, Side, TTPV2_MEASURES};
use ttp_ledger::collect::machine::MachineFacts;
use ttp_ttpv2::analysis::{AnalyzeDocument, QcDocument, RunDocument};

/// The retained QEs' measures of one Q@C, each name prefixed by `prefix`.
fn qc_measures(qc: &QcDocument, prefix: &str) -> (Vec<Measure>, usize) {
    let kept: Vec<_> = if qc.result.dropped_reason.is_some() {
        Vec::new()
    } else {
        qc.qes.iter().filter(|e| e.dropped_by.is_empty()).collect()
    };
    // The ledger's exact time does not rest on the /proc ticks the checks
    // of Step 2 guard, and on a machine other tenants keep busy TTPv2
    // drops nearly every QE (QE2: the daemons used more CPU than the
    // query): the exact time of every QE that ran to its end is compared
    // too, under its own name (docs/compare.md).
    let ran: Vec<f64> = qc
        .qes
        .iter()
        .filter(|e| e.record.spawn_error.is_none() && e.record.timed_out != Some(true))
        .filter_map(|e| e.calc.time_exact_ms)
        .collect();
    let samples: [Vec<f64>; 4] = [
        kept.iter().filter_map(|e| e.calc.time_calc_ms).collect(),
        kept.iter().filter_map(|e| e.calc.time_exact_ms).collect(),
        kept.iter().map(|e| e.record.time_meas_ms).collect(),
        ran,
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

pub(crate) fn run_side(d: RunDocument) -> Result<Side, InputError> {
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
        vprofile: None,
    })
}

/// Several Q@Cs: each measure is named after its Q@C's labels
/// (`cardinality=1000: time_calc_ms`), so the Q@Cs of two analyses are
/// matched by their labels; a Q@C without labels is named after its
/// source file, which matches only when there is one Q@C.
pub(crate) fn analyze_side(d: AnalyzeDocument) -> Result<Side, InputError> {
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
        vprofile: None,
    })
}

/// The Q@Cs of one document as one side per command (`run` with several
/// commands labels each Q@C `name=NAME`), in the order the commands were
/// given. Within a side each measure is named after the Q@C's other labels
/// (`rows=1000: time_calc_ms` in a scan), so the commands are compared at
/// each parameter value; without other labels the names are the bare
/// measures. Every side shares the document's machine and set-up, as the
/// commands ran interleaved on one machine.
pub fn sides_by_name(
    schema: &str,
    machine: Option<&MachineFacts>,
    qcs: &[QcDocument],
) -> Result<Vec<(String, Side)>, InputError> {
    use ttp_ttpv2::model::{NAME_LABEL, qc_name};
    let mut names: Vec<&str> = Vec::new();
    for qc in qcs {
        if let Some(n) = qc.labels.get(NAME_LABEL)
            && !names.contains(&n.as_str())
        {
            names.push(n);
        }
    }
    let mut sides = Vec::new();
    for name in names {
        let mine: Vec<&QcDocument> = qcs
            .iter()
            .filter(|q| q.labels.get(NAME_LABEL).map(String::as_str) == Some(name))
            .collect();
        let (mut measures, mut retained) = (Vec::new(), 0);
        for qc in &mine {
            let mut rest = qc.labels.clone();
            rest.remove(NAME_LABEL);
            let prefix = if rest.is_empty() {
                String::new()
            } else {
                format!("{}: ", qc_name(&rest, None))
            };
            let (ms, n) = qc_measures(qc, &prefix);
            measures.extend(ms);
            retained += n;
        }
        // Compared when it has 2 QEs that ran: measures with fewer samples
        // (the retained ones when Step 2 or 3 dropped the Q@C) are listed
        // by `compare` as not compared.
        if measures
            .iter()
            .filter(|m| m.name.ends_with("time_exact_all_ms"))
            .all(|m| m.samples.len() < 2)
            && mine.iter().all(|qc| qc.result.retained < 2)
        {
            return Err(InputError::TooFew {
                retained,
                unit: "QE(s)",
                why: format!(" of the command named {name:?}"),
            });
        }
        let title = match mine.first() {
            Some(qc) if mine.len() == 1 && !qc.command.is_empty() => {
                format!("`{}`", qc.command.join(" "))
            }
            _ => format!("{} Q@Cs", mine.len()),
        };
        sides.push((
            name.to_string(),
            Side {
                schema: schema.to_string(),
                title,
                retained,
                measures,
                whole_run: Vec::new(),
                setup: setup_of(schema, machine, mine.first().copied()),
                vprofile: None,
            },
        ));
    }
    Ok(sides)
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
