//! `compare` of two saved `ttp.vprofile/1` files: the command's outputs,
//! `report` of its document, and the refusals.
use super::*;
use serde_json::Value;
use ttp_compare::vprofile_tests::{C_A, C_B, profile};

fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec(v).unwrap()).unwrap();
    p
}

fn args(files: Vec<PathBuf>, json: Option<PathBuf>, any_root: bool) -> Args {
    Args {
        files,
        markdown: false,
        json,
        svg: None,
        seed: 1,
        resamples: 1000,
        confidence: 95.0,
        detect: 2.0,
        any_root,
    }
}

/// `--json` writes the root's tests and the factor table, and `report` of
/// that document prints the same verdicts and the descriptive note.
/// Catches a document that drops the vprofile part or a reader that
/// cannot load it back.
#[test]
fn the_command_compares_two_profiles() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.json", &profile(C_A));
    let b = write(dir.path(), "b.json", &profile(C_B));
    let out = dir.path().join("cmp.json");
    run(args(vec![a, b], Some(out.clone()), false)).unwrap();
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["schema"], "ttp.compare/1");
    assert_eq!(v["kind"], "ttp.vprofile/1");
    let vp = &v["comparisons"][0]["vprofile"];
    assert_eq!(vp["root"], "R");
    assert_eq!(vp["invocations_baseline"], 8);
    assert!((vp["welch"]["p"].as_f64().unwrap() - 0.04159679751441784).abs() < 1e-6);
    assert!(vp["factors"].as_array().unwrap().len() >= 2);
    let shown = crate::report::render::load(v.clone()).unwrap();
    let text = shown.text();
    for verdict in ["mean_verdict", "variance_verdict"] {
        assert!(text.contains(vp[verdict].as_str().unwrap()), "{text}");
    }
    assert!(text.contains("descriptive only"), "{text}");
    assert!(text.contains("no test or interval of a share"), "{text}");
    assert!(shown.markdown().contains("| factor | share_A | share_B |"));
    assert_eq!(shown.table().rows.len(), 2);
}

/// Refusals are usage errors (exit 2) of one line: different roots
/// (unless --any-root), a profile of one invocation, a vprofile file
/// against a run file.
#[test]
fn refusals_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.json", &profile(C_A));
    let mut other = profile(C_B);
    other["root"] = "S".into();
    let s = write(dir.path(), "s.json", &other);
    let e = run(args(vec![a.clone(), s.clone()], None, false)).unwrap_err();
    assert_eq!(ttp_sys::error::exit_code(&e), 2, "{e:#}");
    assert!(!format!("{e:#}").contains('\n'));
    assert!(format!("{e:#}").contains("--any-root"), "{e:#}");
    run(args(vec![a.clone(), s], None, true)).unwrap();
    let mut one = profile(C_B);
    one["invocations"] = 1.into();
    let one = write(dir.path(), "one.json", &one);
    let e = run(args(vec![a.clone(), one], None, false)).unwrap_err();
    assert_eq!(ttp_sys::error::exit_code(&e), 2, "{e:#}");
    assert!(
        format!("{e:#}").contains("1 retained invocation(s)"),
        "{e:#}"
    );
    let run_file = write(
        dir.path(),
        "run.json",
        &serde_json::from_str(include_str!("../report/render/fixtures/run-1.json")).unwrap(),
    );
    let e = run(args(vec![a, run_file], None, false)).unwrap_err();
    assert_eq!(ttp_sys::error::exit_code(&e), 2, "{e:#}");
}
