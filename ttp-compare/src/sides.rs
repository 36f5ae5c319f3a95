//! A saved result read as a side of the comparison, by its schema: each
//! protocol's reading (ttpv2.rs, load.rs, vprofile.rs; EMP's here).
use std::collections::BTreeMap;

use serde_json::Value;

use super::input::{EMP_MEASURES, InputError, Measure, Side};
use ttp_emp::EmpOutcome;

/// Reads a saved result; refuses kinds it cannot compare and results with
/// fewer than 2 retained samples.
pub fn side_of(v: Value) -> Result<Side, InputError> {
    let schema = v
        .get("schema")
        .and_then(Value::as_str)
        .ok_or(InputError::NoSchema)?
        .to_string();
    let invalid = |source| InputError::Invalid {
        schema: schema.clone(),
        source,
    };
    let side = match schema.as_str() {
        "ttp.run/1" => super::ttpv2::run_side(serde_json::from_value(v).map_err(invalid)?),
        "ttp.analyze/1" => super::ttpv2::analyze_side(serde_json::from_value(v).map_err(invalid)?),
        "ttp.emp/1" => emp_side(serde_json::from_value(v).map_err(invalid)?),
        "ttp.load/1" => super::load::load_side(serde_json::from_value(v).map_err(invalid)?),
        "ttp.vprofile/1" => {
            super::vprofile::vprofile_side(serde_json::from_value(v).map_err(invalid)?)
        }
        _ => return Err(InputError::NotComparable { schema }),
    }?;
    Ok(side)
}

fn emp_side(o: EmpOutcome) -> Result<Side, InputError> {
    let kept: Vec<_> = o
        .runs
        .iter()
        .filter(|r| r.verdict.is_retained() && r.pt_ns.is_some())
        .collect();
    if kept.len() < 2 {
        return Err(InputError::TooFew {
            retained: kept.len(),
            unit: "run(s)",
            why: String::new(),
        });
    }
    let ms = |ns: u64| ns as f64 / 1e6;
    let samples: [Vec<f64>; 2] = [
        kept.iter().filter_map(|r| r.pt_ns.map(ms)).collect(),
        kept.iter().map(|r| ms(r.et_ns)).collect(),
    ];
    let measures = EMP_MEASURES
        .iter()
        .zip(samples)
        .map(|(s, x)| Measure::of(s, x, "runs"))
        .collect();
    let mut setup = BTreeMap::new();
    setup.insert("schema", o.schema.clone());
    setup.insert("PT source", format!("{:?}", o.pt_source).to_lowercase());
    setup.insert("σ band (k)", o.sigma_k.to_string());
    setup.insert(
        "daemon cut-offs",
        if o.cutoffs.is_some() {
            "applied"
        } else {
            "not applied"
        }
        .to_string(),
    );
    let title = if o.command.is_empty() {
        "command not recorded".to_string()
    } else {
        o.command.join(" ")
    };
    Ok(Side {
        schema: o.schema.clone(),
        title,
        retained: kept.len(),
        measures,
        whole_run: Vec::new(),
        setup,
        vprofile: None,
    })
}
