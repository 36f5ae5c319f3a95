//! A table of strings shown as Markdown or CSV (RFC 4180).

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    /// Column names; names carry the unit (`on_cpu_ms`).
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(columns: &[&str]) -> Self {
        Self {
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, row: Vec<String>) {
        debug_assert_eq!(row.len(), self.columns.len());
        self.rows.push(row);
    }

    /// A GitHub-flavoured Markdown table; cells that look like numbers are
    /// right-aligned.
    pub(crate) fn markdown(&self) -> String {
        let esc = |s: &str| s.replace('|', "\\|").replace('\n', " ");
        let numeric: Vec<bool> = (0..self.columns.len())
            .map(|i| {
                !self.rows.is_empty()
                    && self
                        .rows
                        .iter()
                        .all(|r| r[i].is_empty() || r[i] == "-" || r[i].parse::<f64>().is_ok())
            })
            .collect();
        let mut out = format!(
            "| {} |\n|{}|\n",
            self.columns
                .iter()
                .map(|c| esc(c))
                .collect::<Vec<_>>()
                .join(" | "),
            numeric
                .iter()
                .map(|&n| if n { "---:" } else { ":---" })
                .collect::<Vec<_>>()
                .join("|")
        );
        for r in &self.rows {
            out.push_str(&format!(
                "| {} |\n",
                r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | ")
            ));
        }
        out
    }

    /// CSV with a header line; fields with a comma, quote or newline are
    /// quoted, quotes doubled.
    pub(crate) fn csv(&self) -> String {
        let field = |s: &str| {
            if s.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_string()
            }
        };
        let line = |r: &[String]| r.iter().map(|c| field(c)).collect::<Vec<_>>().join(",");
        let mut out = line(&self.columns);
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }
}

/// ns as ms with three decimals (µs resolution), "" when absent.
pub(crate) fn ms3(ns: Option<f64>) -> String {
    ns.map(|v| format!("{:.3}", v / 1e6)).unwrap_or_default()
}

/// A measured number with three decimals ("5.410", "0.000"), "" when
/// absent: every row of a column has the same precision (docs/report.md).
pub(crate) fn num(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.3}")).unwrap_or_default()
}
