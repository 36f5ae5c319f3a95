//! Sizes a newcomer can read in one sitting (docs/architecture.md,
//! "Invariants"): no Rust file of the workspace over 700 lines, and
//! no function of the command-line layer (`ttp-user/src/cli`, tests aside)
//! over 120 lines, where the command line only parses into plans and calls
//! the layers below. The source is formatted by rustfmt, so a function
//! ends at the first line that closes it at its own indentation.
use std::{
    fs,
    path::{Path, PathBuf},
};

const MAX_FILE_LINES: usize = 700;
const MAX_CLI_FN_LINES: usize = 120;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dir`, build output and hidden folders aside.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&p, out);
            }
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

/// (name, first line, lines) of every function with a body in `text`.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let rest = [
            "pub ",
            "pub(crate) ",
            "pub(super) ",
            "async ",
            "const ",
            "unsafe ",
        ]
        .iter()
        .fold(body, |b, p| b.strip_prefix(p).unwrap_or(b));
        let Some(sig) = rest.strip_prefix("fn ") else {
            continue;
        };
        if line.trim_end().ends_with(';') {
            continue; // a declaration without a body
        }
        let name: String = sig
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let close = format!("{indent}}}");
        if let Some(end) = (i..lines.len()).find(|&j| lines[j].trim_end() == close) {
            out.push((name, i + 1, end - i + 1));
        }
    }
    out
}

#[test]
fn no_file_is_longer_than_one_sitting() {
    let mut files = Vec::new();
    rust_files(&root(), &mut files);
    assert!(files.len() > 100, "found only {} Rust files", files.len());
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = fs::read_to_string(f).unwrap().lines().count();
            (n > MAX_FILE_LINES).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines: {long:?}"
    );
}

#[test]
fn no_command_line_function_is_longer_than_one_screenful_or_two() {
    let mut files = Vec::new();
    rust_files(&root().join("ttp-user/src/cli"), &mut files);
    let mut long = Vec::new();
    for f in files.iter().filter(|f| {
        let name = f.file_name().unwrap().to_string_lossy();
        name != "tests.rs" && !name.ends_with("_tests.rs")
    }) {
        let text = fs::read_to_string(f).unwrap();
        // An inline test module closes the file.
        let code = text.split("\n#[cfg(test)]").next().unwrap_or("");
        for (name, line, n) in functions(code) {
            if n > MAX_CLI_FN_LINES {
                long.push(format!("{}:{line} {name} ({n} lines)", f.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "command-line functions over {MAX_CLI_FN_LINES} lines: {long:?}"
    );
}

#[test]
fn functions_are_measured_from_signature_to_closing_brace() {
    let text = "fn a() {\n    1\n}\n\nimpl X {\n    pub(crate) fn b(\n        x: u8,\n    ) -> u8 {\n        x\n    }\n    fn decl();\n}\n";
    assert_eq!(
        functions(text),
        vec![("a".to_string(), 1, 3), ("b".to_string(), 6, 5)]
    );
}
