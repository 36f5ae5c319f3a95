//! The one table of the saved results ttp writes: each schema with the
//! command that writes it and how `report` loads it. [`super::load`]
//! dispatches through it, the malformed-input tests iterate it, and
//! docs/report.md's table is checked against it.
use serde_json::Value;

use super::{
    attach, blame, compare, emp, recorded,
    rendered::{RenderError, Rendered},
    statements, trace, ttpv2, vprofile,
};

/// One kind of saved result.
pub struct Schema {
    /// The document's `"schema"` field.
    pub name: &'static str,
    /// What writes it, as docs/report.md's "written by" column says.
    pub written_by: &'static str,
    /// Reads a document of this schema into its renderer.
    pub load: fn(Value) -> Result<Box<dyn Rendered>, RenderError>,
}

fn typed<T: serde::de::DeserializeOwned>(schema: &str, v: Value) -> Result<T, RenderError> {
    serde_json::from_value(v).map_err(|source| RenderError::Invalid {
        schema: schema.into(),
        source,
    })
}

/// Every schema `report` renders, in the order `report`'s error names them.
pub const SCHEMAS: &[Schema] = &[
    Schema {
        name: "ttp.attach/1",
        written_by: "`attach --json`",
        load: |v| Ok(Box::new(typed::<attach::AttachDoc>("ttp.attach/1", v)?)),
    },
    Schema {
        name: "ttp.run/1",
        written_by: "`run --json` (TTPv2)",
        load: |v| Ok(Box::new(ttpv2::Run(typed("ttp.run/1", v)?))),
    },
    Schema {
        name: "ttp.analyze/1",
        written_by: "`analyze --json`",
        load: |v| Ok(Box::new(ttpv2::Analyze(typed("ttp.analyze/1", v)?))),
    },
    Schema {
        name: "ttp.emp/1",
        written_by: "`run --protocol emp --json`",
        load: |v| Ok(Box::new(emp::Outcome(typed("ttp.emp/1", v)?))),
    },
    Schema {
        name: "ttp.emp-profile/1",
        written_by: "`calibrate`",
        load: |v| Ok(Box::new(emp::Calibration(typed("ttp.emp-profile/1", v)?))),
    },
    Schema {
        name: "ttp.emp-sample-size/1",
        written_by: "EMPv6 sample size",
        load: |v| {
            Ok(Box::new(emp::SampleSize(typed(
                "ttp.emp-sample-size/1",
                v,
            )?)))
        },
    },
    Schema {
        name: "ttp.blame/1",
        written_by: "`blame --json`",
        load: |v| Ok(Box::new(blame::Blame::new(typed("ttp.blame/1", v)?))),
    },
    Schema {
        name: "ttp.compare/1",
        written_by: "`compare --json`",
        load: |v| Ok(Box::new(compare::Compared(typed("ttp.compare/1", v)?))),
    },
    Schema {
        name: "ttp.load/1",
        written_by: "`load --json`",
        load: |v| {
            Ok(Box::new(typed::<ttp_load::document::LoadDocument>(
                "ttp.load/1",
                v,
            )?))
        },
    },
    Schema {
        name: "ttp.trace/1",
        written_by: "`attach --trace`",
        load: |v| Ok(Box::new(trace::TraceSummary::from_value(v)?)),
    },
    Schema {
        name: "ttp.vprofile/1",
        written_by: "`vprofile --json`",
        load: |v| Ok(Box::new(vprofile::Vprofile(typed("ttp.vprofile/1", v)?))),
    },
    Schema {
        name: "ttp.emp-runs/1",
        written_by: "`run --protocol emp --record`, `calibrate --record`",
        load: |v| Ok(Box::new(recorded::Runs(typed("ttp.emp-runs/1", v)?))),
    },
    Schema {
        name: "ttp.check/1",
        written_by: "`check --json`",
        load: |v| Ok(Box::new(recorded::Check(typed("ttp.check/1", v)?))),
    },
    Schema {
        name: "ttp.inc/1",
        written_by: "`inc --json`",
        load: |v| Ok(Box::new(recorded::Inc(typed("ttp.inc/1", v)?))),
    },
    Schema {
        name: "ttp.statements/1",
        written_by: "`statements --json`",
        load: |v| {
            Ok(Box::new(statements::Statements(
                typed("ttp.statements/1", v)?,
                statements::TOP,
            )))
        },
    },
];

/// The schema named `name`, if `report` knows it.
pub fn schema(name: &str) -> Option<&'static Schema> {
    SCHEMAS.iter().find(|s| s.name == name)
}

/// The known schemas' names, for the error message.
pub(crate) fn known() -> String {
    SCHEMAS
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/report.md's table of schemas: (schema, written by) per row.
    fn documented() -> Vec<(String, String)> {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/report.md"),
        )
        .expect("docs/report.md");
        doc.lines()
            .filter(|l| l.starts_with("| `ttp."))
            .map(|l| {
                let cells: Vec<&str> = l.split(" | ").collect();
                (
                    cells[0]
                        .trim_start_matches("| ")
                        .trim_matches('`')
                        .to_string(),
                    cells[1].to_string(),
                )
            })
            .collect()
    }

    /// Catches a schema `report` loads that docs/report.md leaves out (or
    /// names a command that does not write it), and a documented schema
    /// `report` refuses.
    #[test]
    fn docs_name_every_schema_and_its_writer() {
        let table: Vec<(String, String)> = SCHEMAS
            .iter()
            .map(|s| (s.name.to_string(), s.written_by.to_string()))
            .collect();
        assert_eq!(documented(), table);
    }

    /// Catches two rows for one schema (the second would never load).
    #[test]
    fn schema_names_are_unique() {
        let mut names: Vec<&str> = SCHEMAS.iter().map(|s| s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), SCHEMAS.len());
    }
}
