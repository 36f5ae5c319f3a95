//! `ttp-ebpf run`: repeated executions of a command, timed with the Tucson
//! Timing Protocol v2 (TTPv2, Sec. 8): each execution is one QE measured in
//! the order of Fig. 5, the N QEs form one Q@C, and Steps 1–5 turn them into
//! one number with its sanity checks.
use std::path::Path;

use anyhow::Context;

use super::{
    run_args::{Protocol, RunArgs, check_command, cpu_list, parse_labels},
    run_plan,
};
use crate::{
    commands::{self, Plan},
    report::{
        format::{self, json::Json},
        progress::Progress,
        render,
    },
};
use ttp_ledger::collect::machine::MachineFacts;
use ttp_sys::{
    error::{UsageError, usage},
    sys::{invoker::Invoker, signals::StopFlag, spawn::RunAs},
};
use ttp_ttpv2::{analysis::RunDocument, model::QcInput};

/// Whether the command line asks for several commands or a scan (which
/// `--postgres` does not measure; `--protocol emp` measures several
/// commands, not scans).
fn asks_for_several(args: &RunArgs) -> bool {
    args.command.iter().any(|a| a == run_plan::SEPARATOR)
        || !args.parameter_scan.is_empty()
        || !args.parameter_list.is_empty()
        || args.command_names.len() > 1
}

/// The command line of a TTPv2 `run` of commands, validated once into the
/// plan that `commands::measure` runs (as hyperfine's
/// `Options::from_cli_arguments`).
pub(crate) fn plan(args: &RunArgs) -> anyhow::Result<Plan> {
    let labels = parse_labels(&args.labels)?;
    let commands = run_plan::split_commands(&args.command, &args.command_names)?;
    for c in &commands {
        check_command(&c.argv)?;
    }
    let parameter = if !args.parameter_scan.is_empty() {
        Some(run_plan::scan_values(
            &args.parameter_scan,
            args.parameter_step_size.as_deref(),
        )?)
    } else if !args.parameter_list.is_empty() {
        Some(run_plan::list_values(&args.parameter_list)?)
    } else {
        None
    };
    let qcs = run_plan::qc_specs(
        &commands,
        parameter.as_ref(),
        &labels,
        args.prepare.as_deref(),
        args.plan_cmd.as_deref(),
    )?;
    if qcs.len() > 1 && args.trace.is_some() {
        return usage(
            "--trace follows one Q@C: leave it out with several commands or a parameter scan",
        );
    }
    let pin = match &args.cpu {
        Some(list) => Some(cpu_list(list)?),
        None => None,
    };
    if args.blame && args.blame_window.is_zero() {
        return usage("--blame-window must be longer than 0, e.g. --blame-window 50ms");
    }
    let run_as = if args.as_root {
        RunAs::Current
    } else {
        RunAs::User(Invoker::detect().map_err(|e| UsageError::new(e.to_string()))?)
    };
    Ok(Plan {
        qcs,
        n: args.n,
        parameter: parameter.map(|p| p.name),
        several_commands: commands.len() > 1,
        timeout: args.timeout,
        backoff: args.backoff,
        transient_exit: args.transient_exit.clone(),
        show_output: args.show_output,
        query_process: args.query_process.clone(),
        utilities: args.utilities.clone(),
        pin,
        run_as,
        cold_cache: args
            .cold_cache
            .then(ttp_window::window::cold_cache::ColdCache::new),
        warmup: args.warmup(),
        trace: args.trace.is_some(),
        wake_latency: args.wake_latency,
        irq_time: args.irq_time,
        blame_window: args.blame.then_some(args.blame_window),
    })
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    match route(&args)? {
        Route::Emp => super::run_emp::run(args),
        Route::Postgres(conninfo) => super::run_pg::run(args, &conninfo),
        Route::Commands => run_commands(args),
    }
}

/// Which procedure measures a `run`.
enum Route {
    /// EMP over commands (cli/run_emp.rs).
    Emp,
    /// TTPv2 over one statement of a PostgreSQL server (cli/run_pg.rs).
    Postgres(String),
    /// TTPv2 over one or more commands, interleaved (here).
    Commands,
}

/// Checks the arguments that decide the procedure, and picks it.
fn route(args: &RunArgs) -> anyhow::Result<Route> {
    let emp = args.protocol == Protocol::Emp;
    let scan = !args.parameter_scan.is_empty() || !args.parameter_list.is_empty();
    if scan && emp {
        return usage(
            "parameter scans are measured with TTPv2 (its monotonicity checks order the values); with --protocol emp give the commands separated by :::",
        );
    }
    if args.postgres.is_some() && emp {
        return usage("--postgres measures with TTPv2; --protocol emp applies to commands");
    }
    if emp && args.warmup.is_some() {
        return usage(
            "--warmup applies to TTPv2; --protocol emp makes its own warm-up run before its measured runs (docs/emp.md): leave --warmup out",
        );
    }
    if emp {
        if args.export_markdown.is_some() && !args.command.iter().any(|a| a == run_plan::SEPARATOR)
        {
            return usage(
                "--export-markdown writes TTPv2 reports; with --protocol emp use `ttp-ebpf report FILE --format markdown` on its --json",
            );
        }
        return Ok(Route::Emp);
    }
    args.emp.reject_outside_emp()?;
    if args.n == 0 {
        return usage("-n must be at least 1");
    }
    if let Some(conninfo) = args.postgres.clone() {
        if asks_for_several(args) || args.export_markdown.is_some() {
            return usage(
                "--postgres measures one statement: --command-name, :::, --parameter-scan, -L and --export-markdown apply to commands",
            );
        }
        return Ok(Route::Postgres(conninfo));
    }
    Ok(Route::Commands)
}

/// TTPv2 over the plan's commands (`commands::measure`), with a progress
/// bar and the JSON rewritten after every QE so that an interrupted run
/// keeps its QEs, then the report of one Q@C or of several.
fn run_commands(args: RunArgs) -> anyhow::Result<()> {
    let plan = plan(&args)?;
    let stop = StopFlag::install().context("installing signal handlers")?;
    let bar = Progress::new(u64::from(plan.n) * plan.qcs.len() as u64, "QE");
    let mut on_qe = |qcs: &[QcInput], j: usize, who: &str, machine: &MachineFacts| {
        bar.set_position(qcs.iter().map(|q| q.qes.len() as u64).sum());
        if let Some(r) = qcs[j].qes.last() {
            bar.set_message(format!("{who}: {:.1} ms", r.time_meas_ms));
        }
        match &args.json {
            Some(path) => save(path, qcs, machine),
            None => Ok(()),
        }
    };
    let run = commands::measure(&plan, &stop, &mut on_qe, &|m| bar.notice(m));
    bar.finish_and_clear();
    let commands::Run {
        mut qcs,
        machine,
        measured,
        recording,
    } = run?;
    let (failure, spans, warmups) = (measured.failure, measured.spans, measured.warmups);
    let failure = reportable(&mut qcs, failure)?;
    if qcs.len() > 1 {
        super::run_several::finish(&args, &plan, &qcs, &machine)?;
    } else {
        finish_one(&args, &qcs[0], &machine, recording, &spans, &warmups)?;
    }
    match failure {
        Some(e) => Err(could_not_run(e)),
        None => Ok(()),
    }
}

/// The Q@Cs to report, and the failure that ended the run: a command
/// that could not start at all leaves the error alone, no report (its
/// Q@C's QEs are cleared); nothing left to report is the error.
pub(crate) fn reportable(
    qcs: &mut [QcInput],
    failure: Option<anyhow::Error>,
) -> anyhow::Result<Option<anyhow::Error>> {
    for qc in qcs.iter_mut() {
        if qc.qes.iter().all(|q| q.spawn_error.is_some()) {
            qc.qes.clear();
        }
    }
    if qcs.iter().all(|qc| qc.qes.is_empty()) {
        return match failure {
            Some(e) => Err(e),
            None => usage("interrupted before the first execution: nothing measured"),
        };
    }
    Ok(failure)
}

/// The error of a run a failure ended, after its report.
pub(crate) fn could_not_run(e: anyhow::Error) -> anyhow::Error {
    e.context("the command could not be run; the executions measured before are kept")
}

/// The run's JSON document as `save` writes it, as a value.
pub(crate) fn document(
    qcs: &[QcInput],
    machine: &MachineFacts,
) -> anyhow::Result<serde_json::Value> {
    Ok(match qcs {
        [qc] => serde_json::to_value(RunDocument::new(
            qc,
            Some(machine),
            crate::report::ttpv2::paragraph::text,
        ))?,
        _ => serde_json::to_value(super::run_several::document(qcs, machine))?,
    })
}

/// Writes the run's JSON: one Q@C as `ttp.run/1`, several as
/// `ttp.analyze/1` (what `analyze` writes, so `report` and `compare` read
/// it). Rewritten after every QE, so an interrupted run keeps its QEs.
fn save(path: &Path, qcs: &[QcInput], machine: &MachineFacts) -> anyhow::Result<()> {
    Ok(match qcs {
        [qc] => format::write_unannounced_file(
            path,
            &Json(&RunDocument::new(
                qc,
                Some(machine),
                crate::report::ttpv2::paragraph::text,
            )),
        ),
        _ => {
            format::write_unannounced_file(path, &Json(&super::run_several::document(qcs, machine)))
        }
    }?)
}

/// The protocol track's slices of a run of one Q@C: each warm-up
/// execution, named as one (`warm-up 1`, marked not kept), so that its
/// processes are not taken for QE 1's, then each QE kept with its time
/// span.
fn qe_slices(
    doc: &RunDocument,
    spans: &[(u32, u64, u64)],
    warmups: &[(u32, u64, u64)],
) -> Vec<crate::report::trace::QeSlice> {
    let warm = warmups
        .iter()
        .map(|&(w, t0, t1)| crate::report::trace::QeSlice {
            name: format!("warm-up {w}"),
            start_ns: t0,
            end_ns: t1,
            time_meas_ms: doc
                .qc
                .setup
                .warmup
                .get(w as usize - 1)
                .map_or(0.0, |m| m.time_meas_ms),
            time_calc_ms: None,
            dropped: Some("warm-up execution: measured, not kept (--warmup)".into()),
        });
    let qes = doc.qc.qes.iter().filter_map(|q| {
        let &(_, t0, t1) = spans.iter().find(|(n, _, _)| *n == q.record.qe)?;
        Some(crate::report::trace::QeSlice {
            name: format!("QE {}", q.record.qe),
            start_ns: t0,
            end_ns: t1,
            time_meas_ms: q.record.time_meas_ms,
            time_calc_ms: q.calc.time_calc_ms,
            dropped: (!q.dropped_by.is_empty()).then(|| q.dropped_by.join(", ")),
        })
    });
    warm.chain(qes).collect()
}

/// The report of a run of one Q@C: the TTPv2 report, the JSON, the trace,
/// the chart and the Markdown.
fn finish_one(
    args: &RunArgs,
    qc: &QcInput,
    machine: &MachineFacts,
    recording: Option<ttp_window::window::trace_record::Recording>,
    spans: &[(u32, u64, u64)],
    warmups: &[(u32, u64, u64)],
) -> anyhow::Result<()> {
    let doc = RunDocument::new(qc, Some(machine), crate::report::ttpv2::paragraph::text);
    if let Some(path) = &args.json {
        format::write(path, &Json(&doc))?;
    }
    if let (Some(path), Some(recording)) = (&args.trace, recording) {
        let mut trace = crate::report::trace::Trace::new(recording, "ttp run (TTPv2)");
        for slice in qe_slices(&doc, spans, warmups) {
            trace.add_qe(slice)?;
        }
        format::write(path, &format::chrome::Chrome(&trace))?;
    }
    // The report `report` shows for the saved file, with `--blame`'s
    // section when the QEs carry blame (report/render/ttpv2.rs).
    let shown = render::Run(doc);
    render::print(&shown);
    if let Some(path) = &args.svg {
        format::write(path, &format::svg::Svg::Ttpv2(&shown.0.to_analysis()))?;
    }
    if let Some(path) = &args.export_markdown {
        format::write(path, &format::text::Markdown(&shown))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use ttp_ttpv2::{
        analysis::RunDocument,
        model::{QcInput, WarmUp},
    };
    use ttp_window::window::record::QeRecord;

    /// The warm-up execution is its own slice on the protocol track,
    /// named as a warm-up and marked not kept, before QE 1's; each QE keeps
    /// its name and span. Catches a warm-up shown as QE 1 or not at all.
    #[test]
    fn warm_up_slice_is_named_apart() {
        let mut qc = QcInput {
            labels: Default::default(),
            source: None,
            command: vec!["true".into()],
            setup: Default::default(),
            qes: vec![QeRecord::new(1, 10.0), QeRecord::new(2, 11.0)],
        };
        qc.setup.warmup.push(WarmUp {
            time_meas_ms: 25.0,
            exit_code: Some(0),
            u_ticks: None,
            s_ticks: None,
            time_exact_ms: None,
        });
        let doc = RunDocument::new(&qc, None, crate::report::ttpv2::paragraph::text);
        let slices = super::qe_slices(&doc, &[(1, 300, 400), (2, 500, 610)], &[(1, 100, 250)]);
        let names: Vec<&str> = slices.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["warm-up 1", "QE 1", "QE 2"]);
        assert_eq!((slices[0].start_ns, slices[0].end_ns), (100, 250));
        assert_eq!(slices[0].time_meas_ms, 25.0);
        assert!(
            slices[0]
                .dropped
                .as_deref()
                .is_some_and(|d| d.contains("not kept"))
        );
        assert_eq!((slices[1].start_ns, slices[1].end_ns), (300, 400));
        assert_eq!(slices[2].time_meas_ms, 11.0);
    }
}
