//! Malformed input never panics: `report` and `analyze` (JSON and
//! `--qe-csv`) reject truncated files of each schema, files of the wrong
//! schema, CSV with bad columns, binary garbage and empty files in one line
//! with exit 2 — never a panic (exit 101), never exit 1 (a failure while
//! measuring). The corpus runs the binary, so the one-line rule is checked
//! on its real stderr; the property tests run the same command line
//! in-process (`cli::run_from`) over truncations, byte flips and value
//! swaps of the real saved files, bounded to run in seconds.
use std::{
    panic::AssertUnwindSafe,
    path::{Path, PathBuf},
    process::Command,
};

use proptest::{prelude::*, sample::Index, test_runner::Config};

/// The saved results `report` renders (src/report/render/fixtures): real
/// outputs of attach, run, analyze and load.
const FIXTURES: &[&str] = &[
    "attach-1.json",
    "run-1.json",
    "analyze-1.json",
    "load-1.json",
];

/// Every schema `report` knows: the one table `report` loads through
/// (report/render/schemas.rs), so a schema added there is covered here.
fn schemas() -> impl Iterator<Item = &'static str> {
    ttp_user::report::render::SCHEMAS.iter().map(|s| s.name)
}

fn fixture(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/report/render/fixtures")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Where the document's last `}` is: any cut before it is incomplete JSON.
fn last_brace(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .rposition(|&b| b == b'}')
        .expect("a JSON object")
}

/// A deterministic stand-in for random bytes (xorshift), so the corpus is
/// the same on every run.
fn garbage(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 24) as u8
        })
        .collect()
}

struct Case {
    name: String,
    bytes: Vec<u8>,
}

fn case(name: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Case {
    Case {
        name: name.into(),
        bytes: bytes.into(),
    }
}

/// Malformed JSON inputs for `report` and `analyze`.
fn json_corpus() -> Vec<Case> {
    let mut cases = vec![
        case("empty", ""),
        case("blank", " \n\t\n"),
        case("garbage", garbage(512, 0x9e37_79b9_7f4a_7c15)),
        case("nul bytes", vec![0u8; 64]),
        case("not utf-8", b"{\"schema\": \"ttp.run/1\xff\xfe\"}".to_vec()),
        case("array", "[1, 2, 3]"),
        case("string", "\"ttp.run/1\""),
        case("number", "42"),
        case("null", "null"),
        case("schema not a string", "{\"schema\": 1}"),
        case("unknown schema", "{\"schema\": \"ttp.nope/1\"}"),
        case("deep nesting", "[".repeat(100_000)),
    ];
    for name in FIXTURES {
        let full = fixture(name);
        let end = last_brace(&full);
        for cut in [1, 2, end / 4, end / 2, 3 * end / 4, end] {
            cases.push(case(format!("{name} cut at byte {cut}"), &full[..cut]));
        }
        // The document of one schema under another's name.
        let v: serde_json::Value = serde_json::from_slice(&full).unwrap();
        for schema in schemas() {
            if v["schema"] == schema {
                continue;
            }
            let mut w = v.clone();
            w["schema"] = schema.into();
            cases.push(case(
                format!("{name} labelled {schema}"),
                serde_json::to_vec(&w).unwrap(),
            ));
        }
    }
    for schema in schemas() {
        cases.push(case(
            format!("bare {schema}"),
            format!("{{\"schema\": \"{schema}\"}}"),
        ));
        cases.push(case(
            format!("{schema} with wrong types"),
            format!(
                "{{\"schema\": \"{schema}\", \"qes\": 1, \"processes\": \"x\", \"runs\": {{}}, \"window\": [], \"qcs\": null}}"
            ),
        ));
    }
    cases
}

/// Malformed CSV inputs for `analyze --qe-csv`.
fn csv_corpus() -> Vec<Case> {
    let header = "qe,time_meas_ms,u_ticks,s_ticks,blkio_ticks,iowait_ticks";
    vec![
        case("empty", ""),
        case("header only", format!("{header}\n")),
        case("unknown column", "a,b,c\n1,2,3\n"),
        case("missing column", "qe,time_meas_ms\n1,2\n"),
        case("text for a number", format!("{header}\n1,abc,1,1,0,0\n")),
        case("negative ticks", format!("{header}\n1,100,-5,1,0,0\n")),
        case(
            "fraction for a count",
            format!("{header}\n1,100,1.5,1,0,0\n"),
        ),
        case(
            "too large",
            format!("{header}\n1,100,99999999999999999999999,1,0,0\n"),
        ),
        case("short row", format!("{header}\n1,2,3\n")),
        case("long row", format!("{header}\n1,2,3,4,5,6,7\n")),
        case("empty required", format!("{header}\n1,,1,1,0,0\n")),
        case(
            "duplicate qe",
            format!("{header}\n1,100,1,1,0,0\n1,100,1,1,0,0\n"),
        ),
        case("unterminated quote", format!("{header}\n\"1,100,1,1,0,0\n")),
        case("not utf-8", b"qe,time\xff\n1,2\n".to_vec()),
        case("garbage", garbage(512, 0x2545_f491_4f6c_dd1d)),
        case("a JSON file", fixture("run-1.json")),
    ]
}

fn ttp_bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ttp-ebpf"))
}

/// Catches a parser of outside data that panics, exits 1, or explains in
/// more (or less) than one line.
#[test]
fn malformed_files_are_rejected_in_one_line_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut runs = 0;
    let mut check = |what: String, args: Vec<String>| {
        runs += 1;
        let out = ttp_bin().args(&args).output().expect("run ttp-ebpf");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        let one_line = lines.len() == 1 && lines[0].starts_with("Error: ");
        if out.status.code() != Some(2) || !one_line {
            failures.push(format!(
                "{what}: exit {:?}, stderr {stderr:?}",
                out.status.code()
            ));
        }
    };
    for (i, c) in json_corpus().into_iter().enumerate() {
        let path = dir.path().join(format!("case-{i}.json"));
        std::fs::write(&path, &c.bytes).unwrap();
        let p = path.to_str().unwrap().to_string();
        check(
            format!("report [{}]", c.name),
            vec!["report".into(), p.clone()],
        );
        check(format!("analyze [{}]", c.name), vec!["analyze".into(), p]);
    }
    for (i, c) in csv_corpus().into_iter().enumerate() {
        let path = dir.path().join(format!("case-{i}.csv"));
        std::fs::write(&path, &c.bytes).unwrap();
        let p = path.to_str().unwrap().to_string();
        check(
            format!("analyze --qe-csv [{}]", c.name),
            vec!["analyze".into(), "--qe-csv".into(), p],
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {runs} malformed inputs not rejected cleanly:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Catches truncation being reported as something else: the message must
/// say the file is truncated (and an empty file empty), for both readers.
#[test]
fn a_truncated_file_is_called_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let full = fixture("run-1.json");
    let cut = dir.path().join("cut.json");
    std::fs::write(&cut, &full[..full.len() / 2]).unwrap();
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, "").unwrap();
    for cmd in ["report", "analyze"] {
        let out = ttp_bin().arg(cmd).arg(&cut).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("is truncated"), "{cmd}: {err}");
        let out = ttp_bin().arg(cmd).arg(&empty).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("is empty"), "{cmd}: {err}");
    }
}

/// Runs `ttp-ebpf ARGS… FILE` in-process; Err with the panic's message.
fn run_in_process(args: &[&str], file: &Path) -> Result<u8, String> {
    let mut argv: Vec<String> = vec!["ttp-ebpf".into()];
    argv.extend(args.iter().map(|a| a.to_string()));
    argv.push(file.to_str().unwrap().into());
    std::panic::catch_unwind(AssertUnwindSafe(|| ttp_user::cli::run_from(argv))).map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panic".into())
    })
}

/// Writes `bytes` to a fresh file and runs `report` and `analyze` on it;
/// the exit codes allowed for each.
fn both_commands(bytes: &[u8], allowed: &[u8]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("input.json");
    std::fs::write(&path, bytes).unwrap();
    for cmd in ["report", "analyze"] {
        match run_in_process(&[cmd], &path) {
            Ok(code) => prop_assert!(
                allowed.contains(&code),
                "{cmd} exited {code}, allowed {allowed:?}"
            ),
            Err(msg) => prop_assert!(false, "{cmd} panicked: {msg}"),
        }
    }
    // A document report accepts renders in every format and with its plots.
    if run_in_process(&["report"], &path) == Ok(0) {
        let plots = dir.path().join("plots");
        let plot_arg = format!("--plot={}", plots.display());
        for args in [
            &["report", "--format", "csv"][..],
            &["report", "--format", "markdown"][..],
            &["report", plot_arg.as_str()][..],
        ] {
            match run_in_process(args, &path) {
                Ok(code) => prop_assert!(code == 0, "{args:?} exited {code}"),
                Err(msg) => prop_assert!(false, "{args:?} panicked: {msg}"),
            }
        }
    }
    Ok(())
}

/// Every node of a JSON document, as a JSON pointer.
fn pointers(v: &serde_json::Value, at: String, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, c) in m {
                let key = k.replace('~', "~0").replace('/', "~1");
                pointers(c, format!("{at}/{key}"), out);
            }
        }
        serde_json::Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                pointers(c, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

/// Values a hand-edited or foreign file may hold where a number, string or
/// list was: the extremes and the wrong types.
fn odd_value(i: usize) -> serde_json::Value {
    use serde_json::json;
    [
        json!(0),
        json!(-1),
        json!(0.5),
        json!(1e308),
        json!(-1e308),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(""),
        json!("x"),
        json!(null),
        json!(true),
        json!([]),
        json!({}),
    ][i % 13]
        .clone()
}

fn config() -> Config {
    // Bounded so the three properties run in seconds (PROPTEST_CASES runs
    // more); failures are reported with the shrunk input, which then joins
    // the corpus above.
    Config {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(48),
        failure_persistence: None,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// Any cut of a saved file before its last brace: exit 2, no panic.
    #[test]
    fn truncations_are_usage_errors(f in 0..FIXTURES.len(), at in any::<Index>()) {
        let full = fixture(FIXTURES[f]);
        let cut = at.index(last_brace(&full));
        both_commands(&full[..cut], &[2])?;
    }

    /// A few bytes changed anywhere: still valid (exit 0) or rejected
    /// (exit 2), never a panic or exit 1.
    #[test]
    fn byte_flips_never_panic(
        f in 0..FIXTURES.len(),
        flips in proptest::collection::vec((any::<Index>(), any::<u8>()), 1..4),
    ) {
        let mut bytes = fixture(FIXTURES[f]);
        for (at, b) in flips {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        both_commands(&bytes, &[0, 2])?;
    }

    /// Valid JSON with a few values replaced by extremes or wrong types:
    /// rendered (exit 0) or rejected (exit 2), never a panic or exit 1.
    #[test]
    fn odd_values_never_panic(
        f in 0..FIXTURES.len(),
        swaps in proptest::collection::vec((any::<Index>(), 0usize..13), 1..4),
    ) {
        let mut v: serde_json::Value = serde_json::from_slice(&fixture(FIXTURES[f])).unwrap();
        for (node, value) in swaps {
            let mut all = Vec::new();
            pointers(&v, String::new(), &mut all);
            let at = &all[node.index(all.len())];
            if at.is_empty() {
                v = odd_value(value);
            } else if let Some(slot) = v.pointer_mut(at) {
                *slot = odd_value(value);
            }
        }
        both_commands(&serde_json::to_vec(&v).unwrap(), &[0, 2])?;
    }
}

/// The experiment specification of docs/postgres.md.
const SPEC: &str = r#"name = "self-join at three cardinalities"
connection = "host=/tmp/ttp-pgdev port=54329 user=ttp dbname=postgres"
n = 10
cold_cache = true
cardinalities = [50000, 100000, 200000]

[data]
seed = 42
generate = "SELECT g AS id, (random() * {max_cardinality})::int AS k, md5(random()::text) AS pad FROM generate_series(1, {max_cardinality}) g"

[[query]]
name = "selfjoin"
sql = "SELECT count(*) FROM ttp_var a JOIN ttp_var b ON a.k = b.id"
"#;

/// A real ELF file of this machine for `vprofile --binary`'s reader.
fn an_elf() -> Vec<u8> {
    std::fs::read("/bin/true").expect("/bin/true")
}

fn no_panic<T>(what: &str, f: impl FnOnce() -> T) -> Result<(), TestCaseError> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(_) => Ok(()),
        Err(_) => Err(TestCaseError::fail(format!("{what} panicked"))),
    }
}

proptest! {
    #![proptest_config(config())]

    /// Experiment specifications (TOML) cut short or with bytes changed:
    /// parsed or refused, never a panic.
    #[test]
    fn experiment_specs_never_panic(
        cut in any::<Index>(),
        flips in proptest::collection::vec((any::<Index>(), any::<u8>()), 0..4),
    ) {
        let mut bytes = SPEC.as_bytes()[..cut.index(SPEC.len() + 1)].to_vec();
        for (at, b) in flips {
            if !bytes.is_empty() {
                let i = at.index(bytes.len());
                bytes[i] = b;
            }
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        no_panic("Spec::parse", || ttp_user::pg::experiment::Spec::parse(&text))?;
    }

    /// ELF files cut short or with bytes changed (headers, tables,
    /// symbols): read or refused by `vprofile`'s reader, never a panic.
    #[test]
    fn elf_files_never_panic(
        cut in any::<Index>(),
        flips in proptest::collection::vec((any::<Index>(), any::<u8>()), 0..8),
        head_only in any::<bool>(),
    ) {
        let full = an_elf();
        let mut bytes = full[..cut.index(full.len()) + 1].to_vec();
        // Half the cases change the ELF and program/section headers, where
        // a flip changes offsets and sizes rather than code.
        let span = if head_only { bytes.len().min(256) } else { bytes.len() };
        for (at, b) in flips {
            let i = at.index(span);
            bytes[i] = b;
        }
        no_panic("ElfImage::parse", || {
            ttp_vprofile::elf::ElfImage::parse(Path::new("/bin/true"), bytes)
                .map(|elf| {
                    for f in elf.functions() {
                        let _ = elf.code(f.address, f.size_bytes);
                    }
                })
        })?;
    }
}
