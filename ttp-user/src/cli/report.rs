//! `ttp-ebpf report`: a saved result shown again, without root.
use std::{io::Write, path::PathBuf};

use crate::report::{
    format::text,
    render::{self, Format},
};
use ttp_sys::{error::usage, sys::export::Exporter};

/// Show a saved ttp result again: the terminal report, a Markdown table for
/// papers and notebooks, CSV of its per-process, per-QE or per-run
/// measures, or its plots. Reads any JSON a ttp-ebpf command wrote
/// (attach, run, analyze, emp, calibrate, blame, load, vprofile, check,
/// inc, --trace and --record files)
/// and needs no privileges.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A JSON file written by a ttp-ebpf command (its "schema" field says
    /// which).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Also write the plots of this kind of result (SVG; DOT for blame)
    /// into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// An attach summary (text): list this many processes, busiest first
    /// (0: all of them).
    #[arg(long, value_name = "N", default_value_t = render::attach::DEFAULT_TOP)]
    pub top: usize,
    /// An attach summary (text): show every cross-check comparison, not
    /// only the flagged ones.
    #[arg(long)]
    pub checks: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let bytes = match std::fs::read(&args.file) {
        Ok(b) => b,
        Err(e) => return usage(format!("cannot read {}: {e}", args.file.display())),
    };
    let value: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => return usage(not_json(&args.file, &bytes, &e)),
    };
    // Every way a file can fail to load is the file's fault, not a failure
    // of this run: one line, exit 2.
    let doc = match render::load(value.clone()) {
        Ok(d) => d,
        Err(e) => return usage(format!("{}: {e}", args.file.display())),
    };
    match args.format {
        Format::Text => match serde_json::from_value::<render::attach::AttachDoc>(value.clone()) {
            Ok(a) if a.schema == render::attach::ATTACH_SCHEMA => print!(
                "{}",
                a.text_with(&render::attach::TextOptions {
                    top: (args.top > 0).then_some(args.top),
                    all_checks: args.checks,
                })
            ),
            _ => print_exported(&text::Text(doc.as_ref()))?,
        },
        Format::Json => println!("{}", serde_json::to_string_pretty(&value)?),
        Format::Markdown => print_exported(&text::Markdown(doc.as_ref()))?,
        Format::Csv => print!("{}", doc.table().csv()),
    }
    if let Some(dir) = &args.plot {
        let files = doc.plots(dir)?;
        if files.is_empty() {
            eprintln!("ttp: this kind of result has no plots");
        }
        for f in files {
            crate::report::atomic::announce(&f);
        }
    }
    Ok(())
}

/// A format's bytes on stdout.
fn print_exported(format: &dyn Exporter) -> anyhow::Result<()> {
    std::io::stdout().write_all(&format.serialize()?)?;
    Ok(())
}

/// Why `bytes` are not JSON, in one line: a file that ends inside its JSON
/// is said to be truncated (a copy cut short, a disk that filled up; ttp's
/// own writes are atomic and never leave one).
pub(crate) fn not_json(file: &std::path::Path, bytes: &[u8], e: &serde_json::Error) -> String {
    if e.is_eof() && !bytes.iter().all(u8::is_ascii_whitespace) {
        format!(
            "{} is truncated: its JSON ends at byte {} before the document does; give the complete file",
            file.display(),
            bytes.len()
        )
    } else if bytes.iter().all(u8::is_ascii_whitespace) {
        format!(
            "{} is empty: give a file written by a ttp-ebpf command's --json or --trace",
            file.display()
        )
    } else {
        format!(
            "{} is not JSON ({e}): give a file written by a ttp-ebpf command's --json or --trace",
            file.display()
        )
    }
}
