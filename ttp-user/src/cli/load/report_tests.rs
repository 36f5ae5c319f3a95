//! `report` of a load JSON prints what `load` printed: the run's document,
//! as `load` prints it, is the truth the saved file's rendering is held to.
use clap::Parser;

use super::*;
use crate::cli::{Cli, Command};
use ttp_load::output::OutputFiles;

/// Both models against the simulated queue on the virtual clock, with a
/// hiccup and a latency limit so every line of the phase summaries
/// appears: `report`'s text of the saved document equals the command's.
/// Catches a target shown as raw JSON, headers or phase lines that drift
/// from the command's.
#[test]
fn report_of_a_load_file_prints_what_load_printed() {
    let argv = [
        "ttp-ebpf",
        "load",
        "--rate",
        "100",
        "--duration",
        "3s",
        "--model",
        "all",
        "--connections",
        "2",
        "--simulate",
        "--capacity",
        "125",
        "--hiccup-at",
        "1s",
        "--hiccup-for",
        "300ms",
        "--latency-limit",
        "100ms",
    ];
    let Command::Load(args) = Cli::try_parse_from(argv).unwrap().command else {
        panic!("not a load command");
    };
    let cfg = args.validate().unwrap();
    let report = measure(&cfg).unwrap();
    let printed = crate::report::render::Rendered::text(&report.document(OutputFiles::default()));
    let doc = serde_json::to_value(report.document(OutputFiles::default())).unwrap();
    let shown = crate::report::render::load(doc.clone()).unwrap().text();
    assert_eq!(shown, printed);
    // Read back by the type that wrote it, nothing is lost or added.
    let back: ttp_load::document::LoadDocument = serde_json::from_value(doc.clone()).unwrap();
    assert_eq!(serde_json::to_value(back).unwrap(), doc);
    assert!(printed.contains("load: simulated SickStore queue (capacity 125 req/s"));
    assert!(printed.contains("closed:"), "{printed}");
}
