//! What one `run` measures, validated once from the command line: the
//! commands (several, separated by `:::`), the values of a parameter scan,
//! and from them the Q@Cs, each with its command, labels and set-up; and
//! the order in which their QEs run (interleaved, rotated every round;
//! `ttp_ttpv2::procedure`); and `run`'s defaults, for runs built
//! in code (the lab worker's tasks). docs/run.md gives the syntax and why
//! it was chosen.
use std::time::Duration;

use super::run_args::RunArgs;
use crate::commands::QcSpec;
use ttp_sys::error::UsageError;
use ttp_ttpv2::model::Labels;

impl RunArgs {
    /// `--warmup N`, 1 when not given.
    pub(crate) fn warmup(&self) -> u32 {
        self.warmup.unwrap_or(1)
    }
}

/// What `run` takes when an option is not given, as its command line has
/// it (a test holds the two equal): a run built in code starts from these
/// and sets its own fields.
impl Default for RunArgs {
    fn default() -> Self {
        RunArgs {
            protocol: Default::default(),
            n: 10,
            cold_cache: false,
            warmup: None,
            prepare: None,
            plan_cmd: None,
            query_process: None,
            utilities: Vec::new(),
            timeout: Duration::from_secs(20 * 60),
            labels: Vec::new(),
            json: None,
            svg: None,
            trace: None,
            wake_latency: false,
            irq_time: false,
            as_root: false,
            blame: false,
            blame_window: Duration::from_millis(50),
            postgres: None,
            sql: None,
            restart_cmd: None,
            backoff: Duration::from_millis(100),
            transient_exit: Vec::new(),
            cpu: None,
            show_output: false,
            command_names: Vec::new(),
            parameter_scan: Vec::new(),
            parameter_step_size: None,
            parameter_list: Vec::new(),
            export_markdown: None,
            emp: Default::default(),
            command: Vec::new(),
        }
    }
}

/// Separates the commands of one run: `-- CMD1 ARGS ::: CMD2 ARGS`
/// (GNU parallel's separator, which no shell gives a meaning).
pub(crate) const SEPARATOR: &str = ":::";

/// The label that names a command's Q@Cs (`--command-name`).
use ttp_ttpv2::model::NAME_LABEL;

/// Most Q@Cs a scan may make; more is almost surely a mistyped step.
const MAX_VALUES: usize = 1000;

/// One command as given, with its name when one was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NamedCommand {
    pub name: Option<String>,
    pub argv: Vec<String>,
}

/// Splits the trailing arguments at `:::` into commands. A command after a
/// separator may be introduced by `--command-name NAME` (or `--name NAME`)
/// and `--`; `names` (the `--command-name` options before the first `--`)
/// name the commands in order.
pub(crate) fn split_commands(
    trailing: &[String],
    names: &[String],
) -> Result<Vec<NamedCommand>, UsageError> {
    let mut out: Vec<NamedCommand> = Vec::new();
    for (i, seg) in trailing.split(|a| a == SEPARATOR).enumerate() {
        let mut seg = seg;
        let mut name = None;
        if i > 0 {
            if let Some(flag) = seg.first().map(String::as_str) {
                if let Some(v) = flag
                    .strip_prefix("--command-name=")
                    .or_else(|| flag.strip_prefix("--name="))
                {
                    name = Some(v.to_string());
                    seg = &seg[1..];
                } else if flag == "--command-name" || flag == "--name" {
                    let Some(v) = seg.get(1) else {
                        return Err(UsageError::new(format!(
                            "{flag} after `{SEPARATOR}` needs a name: `{SEPARATOR} {flag} NEW -- CMD`"
                        )));
                    };
                    name = Some(v.clone());
                    seg = &seg[2..];
                }
            }
            if name.is_some() && seg.first().is_some_and(|a| a == "--") {
                seg = &seg[1..];
            }
        }
        if seg.is_empty() {
            return Err(UsageError::new(format!(
                "command {} is empty: give one command between each `{SEPARATOR}` (e.g. -- ./old ::: ./new)",
                i + 1
            )));
        }
        out.push(NamedCommand {
            name,
            argv: seg.to_vec(),
        });
    }
    if names.len() > out.len() {
        return Err(UsageError::new(format!(
            "{} --command-name options for {} command(s): give one name per command",
            names.len(),
            out.len()
        )));
    }
    for (c, n) in out.iter_mut().zip(names) {
        if let Some(inline) = &c.name {
            return Err(UsageError::new(format!(
                "the command named {inline:?} after `{SEPARATOR}` is also named {n:?} by --command-name: name it once"
            )));
        }
        c.name = Some(n.clone());
    }
    Ok(out)
}

/// The scanned parameter and its values, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Parameter {
    pub name: String,
    pub values: Vec<String>,
}

/// A decimal number as an integer count of `10^-scale`.
fn scaled(s: &str, scale: u32) -> Option<i128> {
    let s = s.trim();
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
        || frac.len() as u32 > scale
    {
        return None;
    }
    let mut v: i128 = 0;
    for b in int.bytes().chain(frac.bytes()) {
        v = v.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
    }
    v = v.checked_mul(10i128.checked_pow(scale - frac.len() as u32)?)?;
    Some(if neg { -v } else { v })
}

fn decimals(s: &str) -> u32 {
    s.trim().split_once('.').map_or(0, |(_, f)| f.len() as u32)
}

/// `--parameter-scan NAME MIN MAX [-D STEP]`: MIN, MIN + STEP, … up to MAX,
/// computed in exact decimal arithmetic (0.1 + 0.2 is 0.3) and written with
/// as many decimals as the inputs have. Without a step, MIN and MAX are
/// integers and the step is 1 (hyperfine's rule).
pub(crate) fn scan_values(scan: &[String], step: Option<&str>) -> Result<Parameter, UsageError> {
    let [name, min, max] = scan else {
        return Err(UsageError::new(
            "--parameter-scan takes three values: NAME MIN MAX (e.g. --parameter-scan rows 1000 4000 -D 1000)",
        ));
    };
    check_name(name)?;
    let scale = if step.is_some() {
        [min.as_str(), max.as_str(), step.unwrap_or("1")]
            .iter()
            .map(|s| decimals(s))
            .max()
            .unwrap_or(0)
    } else {
        0
    };
    let num = |what: &str, s: &str| {
        scaled(s, scale).ok_or_else(|| {
            UsageError::new(format!(
                "--parameter-scan {what} {s:?} is not {}",
                if step.is_some() {
                    "a decimal number"
                } else {
                    "an integer (give -D STEP to scan decimals)"
                }
            ))
        })
    };
    let (lo, hi) = (num("MIN", min)?, num("MAX", max)?);
    let d = match step {
        Some(s) => scaled(s, scale)
            .filter(|&d| d > 0)
            .ok_or_else(|| UsageError::new(format!("-D {s:?} is not a positive step")))?,
        None => 1,
    };
    if lo > hi {
        return Err(UsageError::new(format!(
            "--parameter-scan MIN {min} is above MAX {max}: give the smaller value first"
        )));
    }
    let count = (hi - lo) / d + 1;
    if count > MAX_VALUES as i128 {
        return Err(UsageError::new(format!(
            "--parameter-scan {min} to {max} in steps of {} makes {count} Q@Cs; at most {MAX_VALUES}: give a larger -D",
            step.unwrap_or("1")
        )));
    }
    let fmt = |v: i128| {
        if scale == 0 {
            return v.to_string();
        }
        let p = 10i128.pow(scale);
        let sign = if v < 0 { "-" } else { "" };
        format!(
            "{sign}{}.{:0w$}",
            v.abs() / p,
            v.abs() % p,
            w = scale as usize
        )
    };
    Ok(Parameter {
        name: name.clone(),
        values: (0..count).map(|k| fmt(lo + k * d)).collect(),
    })
}

/// `-L NAME=v1,v2,…` or hyperfine's `-L NAME v1,v2,…`.
pub(crate) fn list_values(list: &[String]) -> Result<Parameter, UsageError> {
    if list.len() > 2 || (list.len() == 2 && list.iter().all(|a| a.contains('='))) {
        return Err(UsageError::new(
            "one parameter per run: give -L once (run once per further parameter)",
        ));
    }
    let (name, values) = match list {
        [one] => one.split_once('=').ok_or_else(|| {
            UsageError::new(format!(
                "-L {one:?} is not NAME=v1,v2,… (e.g. -L rows=1000,2000,4000)"
            ))
        })?,
        [name, values] if !name.contains('=') => (name.as_str(), values.as_str()),
        _ => {
            return Err(UsageError::new(
                "-L takes NAME=v1,v2,… (or NAME v1,v2,…); put -- before the command",
            ));
        }
    };
    check_name(name)?;
    let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
    if values.iter().any(String::is_empty) {
        return Err(UsageError::new(format!(
            "-L {name}: an empty value in the list; give v1,v2,… without empty items"
        )));
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(dup) = values.iter().find(|v| !seen.insert(v.as_str())) {
        return Err(UsageError::new(format!(
            "-L {name}: {dup:?} is listed twice; each value is one Q@C"
        )));
    }
    Ok(Parameter {
        name: name.to_string(),
        values,
    })
}

fn check_name(name: &str) -> Result<(), UsageError> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
    {
        return Err(UsageError::new(format!(
            "parameter name {name:?}: use letters, digits, _ and - (it becomes {{NAME}} in the command and the label NAME=VALUE)"
        )));
    }
    Ok(())
}

/// `{NAME}` replaced by `value` in `s`.
pub(crate) fn substitute(s: &str, p: Option<(&str, &str)>) -> String {
    match p {
        Some((name, value)) => s.replace(&format!("{{{name}}}"), value),
        None => s.to_string(),
    }
}

/// The Q@Cs: every command at every value of the parameter, commands
/// outer. Each carries the `--label`s, `name=NAME` when the run has several
/// commands or a name was given, and `PARAMETER=VALUE` in a scan; `{NAME}`
/// is substituted in the command, `--prepare` and `--plan-cmd`.
pub(crate) fn qc_specs(
    commands: &[NamedCommand],
    parameter: Option<&Parameter>,
    labels: &Labels,
    prepare: Option<&str>,
    plan_cmd: Option<&str>,
) -> Result<Vec<QcSpec>, UsageError> {
    let several = commands.len() > 1;
    let mut names = std::collections::BTreeSet::new();
    let mut named: Vec<(Option<String>, &NamedCommand)> = Vec::new();
    for c in commands {
        let name = match &c.name {
            Some(n) => Some(n.clone()),
            None if several => Some(c.argv.join(" ")),
            None => None,
        };
        if let Some(n) = &name {
            if n.trim().is_empty() {
                return Err(UsageError::new(
                    "--command-name is empty: give each command a name",
                ));
            }
            if !names.insert(n.clone()) {
                return Err(UsageError::new(format!(
                    "two commands are named {n:?}: give each its own --command-name"
                )));
            }
        }
        named.push((name, c));
    }
    for key in [Some(NAME_LABEL), parameter.map(|p| p.name.as_str())]
        .into_iter()
        .flatten()
    {
        let used = key != NAME_LABEL || named.iter().any(|(n, _)| n.is_some());
        if used && labels.contains_key(key) {
            return Err(UsageError::new(format!(
                "--label {key}=… is set by the run itself here ({}): choose another label key",
                if key == NAME_LABEL {
                    "the command's name"
                } else {
                    "the scanned parameter"
                }
            )));
        }
    }
    if let Some(p) = parameter {
        let pat = format!("{{{}}}", p.name);
        let used = commands
            .iter()
            .flat_map(|c| &c.argv)
            .map(String::as_str)
            .chain(prepare)
            .chain(plan_cmd)
            .any(|a| a.contains(&pat));
        if !used {
            return Err(UsageError::new(format!(
                "the scan of {} is not used: put {pat} in the command (e.g. -- ./query --rows {pat})",
                p.name
            )));
        }
    }
    let values: Vec<Option<&str>> = match parameter {
        Some(p) => p.values.iter().map(|v| Some(v.as_str())).collect(),
        None => vec![None],
    };
    let mut out = Vec::new();
    for (name, c) in named {
        for v in &values {
            let sub = v.zip(parameter).map(|(v, p)| (p.name.as_str(), v));
            let mut l = labels.clone();
            if let Some(n) = &name {
                l.insert(NAME_LABEL.into(), n.clone());
            }
            if let Some((k, v)) = sub {
                l.insert(k.into(), v.into());
            }
            out.push(QcSpec {
                labels: l,
                argv: c.argv.iter().map(|a| substitute(a, sub)).collect(),
                prepare: prepare.map(|s| substitute(s, sub)),
                plan_cmd: plan_cmd.map(|s| substitute(s, sub)),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    /// Catches a separator or a name flag taken for part of a command,
    /// names given twice, and an empty command between separators.
    #[test]
    fn commands_split_at_the_separator_with_names() {
        let c = split_commands(
            &s(&["./a", "-x", ":::", "--name", "new", "--", "./b", "--", "y"]),
            &s(&["old"]),
        )
        .unwrap();
        assert_eq!(
            c,
            vec![
                NamedCommand {
                    name: Some("old".into()),
                    argv: s(&["./a", "-x"])
                },
                NamedCommand {
                    name: Some("new".into()),
                    argv: s(&["./b", "--", "y"])
                },
            ]
        );
        let c = split_commands(&s(&["a", ":::", "b", ":::", "c"]), &s(&["x", "y"])).unwrap();
        let names: Vec<_> = c.iter().map(|c| c.name.clone()).collect();
        assert_eq!(names, [Some("x".into()), Some("y".into()), None]);
        assert!(split_commands(&s(&["a", ":::"]), &[]).is_err());
        assert!(split_commands(&s(&["a", ":::", "--name=b", "b"]), &s(&["1", "2"])).is_err());
        assert!(split_commands(&s(&["a"]), &s(&["1", "2"])).is_err());
    }

    /// Hand-computed values; catches float steps (0.1 × 3 ≠ 0.3), an
    /// inclusive end missed, and bad input accepted.
    #[test]
    fn scans_are_exact_decimals() {
        let v = |args: &[&str], d: Option<&str>| scan_values(&s(args), d).map(|p| p.values);
        assert_eq!(
            v(&["rows", "1000", "4000"], Some("1000")).unwrap(),
            ["1000", "2000", "3000", "4000"]
        );
        assert_eq!(v(&["k", "1", "3"], None).unwrap(), ["1", "2", "3"]);
        assert_eq!(
            v(&["f", "0.1", "0.4"], Some("0.1")).unwrap(),
            ["0.1", "0.2", "0.3", "0.4"]
        );
        assert_eq!(v(&["f", "0", "1"], Some("0.25")).unwrap().len(), 5);
        assert_eq!(v(&["f", "-1", "1"], Some("1")).unwrap(), ["-1", "0", "1"]);
        assert_eq!(v(&["k", "1", "10"], Some("4")).unwrap(), ["1", "5", "9"]);
        assert!(v(&["k", "0.5", "2"], None).is_err(), "decimals need -D");
        assert!(v(&["k", "3", "1"], None).is_err());
        assert!(v(&["k", "1", "3"], Some("0")).is_err());
        assert!(v(&["k", "1", "1000000"], None).is_err());
        assert!(v(&["{x}", "1", "2"], None).is_err());
    }

    #[test]
    fn lists_in_both_spellings() {
        let p = list_values(&s(&["rows=1,2,4"])).unwrap();
        assert_eq!((p.name.as_str(), p.values), ("rows", s(&["1", "2", "4"])));
        let p = list_values(&s(&["cc", "gcc,clang"])).unwrap();
        assert_eq!((p.name.as_str(), p.values), ("cc", s(&["gcc", "clang"])));
        assert!(list_values(&s(&["rows"])).is_err());
        assert!(list_values(&s(&["rows=1,,2"])).is_err());
        assert!(list_values(&s(&["rows=1,1"])).is_err());
        assert!(list_values(&s(&["rows=1", "./q"])).is_err());
        let two = list_values(&s(&["a=1,2", "b=3,4"])).unwrap_err();
        assert!(two.to_string().contains("one parameter per run"), "{two}");
    }

    /// Catches a parameter not substituted (in the command, --prepare,
    /// --plan-cmd), labels missing or clashing, and a scan whose command
    /// never uses the parameter.
    #[test]
    fn specs_label_and_substitute() {
        let cmds =
            split_commands(&s(&["./q", "--rows={rows}", ":::", "./r", "{rows}"]), &[]).unwrap();
        let p = list_values(&s(&["rows=10,20"])).unwrap();
        let mut base = Labels::new();
        base.insert("query".into(), "q1".into());
        let q = qc_specs(&cmds, Some(&p), &base, Some("prep {rows}"), None).unwrap();
        assert_eq!(q.len(), 4);
        assert_eq!(q[1].argv, s(&["./q", "--rows=20"]));
        assert_eq!(q[2].argv, s(&["./r", "10"]));
        assert_eq!(q[3].prepare.as_deref(), Some("prep 20"));
        assert_eq!(q[0].labels["name"], "./q --rows={rows}");
        assert_eq!(q[0].labels["rows"], "10");
        assert_eq!(q[0].labels["query"], "q1");
        // One unnamed command: no name label.
        let one = split_commands(&s(&["./q", "{rows}"]), &[]).unwrap();
        let q = qc_specs(&one, Some(&p), &Labels::new(), None, None).unwrap();
        assert!(!q[0].labels.contains_key("name"));
        let unused = split_commands(&s(&["./q"]), &[]).unwrap();
        assert!(qc_specs(&unused, Some(&p), &Labels::new(), None, None).is_err());
        let mut clash = Labels::new();
        clash.insert("rows".into(), "1".into());
        assert!(qc_specs(&one, Some(&p), &clash, None, None).is_err());
        let same = split_commands(&s(&["a", ":::", "b"]), &s(&["x", "x"])).unwrap();
        assert!(qc_specs(&same, None, &Labels::new(), None, None).is_err());
    }

    /// Catches a default of `run`'s command line changed without the
    /// runs built in code (the lab worker's tasks) following it.
    #[test]
    fn defaults_are_the_command_lines() {
        use clap::Parser;
        #[derive(Parser)]
        struct Line {
            #[command(flatten)]
            run: RunArgs,
        }
        let parsed = Line::try_parse_from(["run", "--", "x"]).unwrap().run;
        let built = RunArgs {
            command: s(&["x"]),
            ..RunArgs::default()
        };
        assert_eq!(format!("{parsed:?}"), format!("{built:?}"));
    }

    /// The refusals of the command line, before anything is measured: one
    /// line, exit 2. Catches a scan passed on to EMP or PostgreSQL, several
    /// commands on PostgreSQL (which would run `:::` as an argument), EMP
    /// options that follow one program, and a scan that measures one
    /// command under several labels.
    #[test]
    fn refused_before_measuring() {
        let code = |args: &[&str]| {
            let mut v = vec!["ttp-ebpf", "run"];
            v.extend_from_slice(args);
            crate::cli::run_from(v)
        };
        let emp = [
            "--protocol",
            "emp",
            "--record",
            "r",
            "--",
            "true",
            ":::",
            "false",
        ];
        assert_eq!(code(&emp), 2);
        assert_eq!(
            code(&["--protocol", "emp", "--", "true", ":::", "no-such-xyz"]),
            2
        );
        assert_eq!(code(&["--protocol", "emp", "-L", "x=1,2", "--", "true"]), 2);
        assert_eq!(
            code(&["--postgres", "host=x", "--sql", "select 1", "-L", "x=1,2"]),
            2
        );
        assert_eq!(code(&["-L", "rows=1,2", "--", "true"]), 2);
        assert_eq!(
            code(&["--parameter-scan", "k", "3", "1", "--", "true", "{k}"]),
            2
        );
        assert_eq!(code(&["--", "true", ":::"]), 2);
        assert_eq!(code(&["--", "true", ":::", "no-such-command-xyz"]), 2);
        assert_eq!(
            code(&[
                "--command-name",
                "a",
                "--command-name",
                "a",
                "--",
                "true",
                ":::",
                "false"
            ]),
            2
        );
    }
}
