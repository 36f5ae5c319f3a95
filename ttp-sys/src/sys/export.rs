//! What every output format of ttp is: a result turned into the bytes of
//! its file or message, as hyperfine's `Exporter`. The trait sits in the
//! lowest crate so that both sides implement the one trait: `ttp-user`'s
//! report formats (`report/format/`: JSON, text, Markdown, SVG, DOT,
//! Chrome trace, hgrm), written as result files, and `ttp-serve`'s
//! OpenMetrics and OTLP, which serve cannot hand up to `ttp-user` (it sits
//! below it) and which are answered over HTTP or pushed, not written.

/// One output format of one result.
pub trait Exporter {
    /// The bytes of the file (or of the HTTP body).
    fn serialize(&self) -> Result<Vec<u8>, ExportError>;
}

/// A result that could not be put in a format (a chart plotters refused,
/// a value JSON cannot hold); the message says what and why, in one line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ExportError(pub String);
