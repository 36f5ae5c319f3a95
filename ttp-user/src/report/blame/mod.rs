//! Contention blame (`ttp.blame/1`) for people: the terminal report, the
//! per-QE summary of `run --blame`, and the blame graph as Graphviz DOT.
pub(crate) mod dot;
mod text;

pub(crate) use text::{blame_text, summary_text};

#[cfg(test)]
mod tests;
