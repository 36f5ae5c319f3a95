//! Graphviz DOT: blame's graph of culprits (`blame --dot`).
use ttp_blame::graph::Graph;
use ttp_sys::sys::export::{ExportError, Exporter};

/// The graph under its title.
pub(crate) struct Dot<'a> {
    pub graph: &'a Graph,
    pub title: String,
}

impl Exporter for Dot<'_> {
    fn serialize(&self) -> Result<Vec<u8>, ExportError> {
        Ok(crate::report::blame::dot::render(self.graph, &self.title).into_bytes())
    }
}
