//! Test support: builds tests/fixtures/vprof-target (a C program whose
//! latency variance has known sources), runs it, and reads the durations it
//! measured with its own clock.
use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
};

use ttp_variance::{ChildTable, Invocation};

const SOURCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/vprof-target/vprof_target.c"
);

/// How the fixture is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// `cc -O1 -fno-inline -g` (a PIE on Debian).
    Pie,
    /// The same with `-no-pie` (fixed addresses, `ET_EXEC`).
    NoPie,
    /// The same with `-s` (no `.symtab`).
    Stripped,
}

fn dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("ttp-vprof-fixture-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("create fixture directory");
        d
    })
    .clone()
}

/// Path of the compiled fixture (compiled once per test process).
pub fn build(variant: Variant) -> PathBuf {
    static BUILT: OnceLock<std::sync::Mutex<HashMap<Variant, PathBuf>>> = OnceLock::new();
    let mut built = BUILT.get_or_init(Default::default).lock().expect("lock");
    if let Some(p) = built.get(&variant) {
        return p.clone();
    }
    let (name, extra): (&str, &[&str]) = match variant {
        Variant::Pie => ("vprof-target", &[]),
        Variant::NoPie => ("vprof-target-nopie", &["-no-pie"]),
        Variant::Stripped => ("vprof-target-stripped", &["-s"]),
    };
    let out = dir().join(name);
    let status = Command::new("cc")
        .args(["-O1", "-fno-inline", "-g", "-Wall", "-o"])
        .arg(&out)
        .arg(SOURCE)
        .args(extra)
        .status()
        .expect("run cc (install a C compiler: apt-get install gcc)");
    assert!(status.success(), "cc failed to build {SOURCE}");
    built.insert(variant, out.clone());
    out
}

/// The fixture as a distribution ships a program
/// (tests/fixtures/vprof-target/build-split.sh): its functions below the
/// roots static and named only by `debug`, `binary` stripped with a
/// `.gnu_debuglink` to it.
#[cfg(test)]
#[derive(Debug, Clone)]
pub(crate) struct Split {
    pub binary: PathBuf,
    pub debug: PathBuf,
}

/// Builds [`Split`] into `dir`.
#[cfg(test)]
pub(crate) fn build_split(dir: &Path) -> Split {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/vprof-target/build-split.sh"
    );
    let ok = Command::new("sh")
        .arg(script)
        .arg(dir)
        .status()
        .expect("run build-split.sh")
        .success();
    assert!(ok, "{script} failed (it needs gcc and binutils)");
    let binary = dir.join("vprof-target-split");
    Split {
        debug: binary.with_extension("debug"),
        binary,
    }
}

/// The program's own clock readings: column name → ns per invocation.
#[derive(Debug, Clone)]
pub struct Records {
    pub columns: HashMap<String, Vec<u64>>,
    pub invocations: usize,
}

impl Records {
    /// The same readings with column `from` called `to` (a function the
    /// binary under test names differently, e.g. `sub_ADDR`).
    #[cfg(test)]
    pub(crate) fn renamed(mut self, from: &str, to: &str) -> Self {
        if let Some(c) = self.columns.remove(from) {
            self.columns.insert(to.to_owned(), c);
        }
        self
    }

    pub(crate) fn column(&self, name: &str) -> &[u64] {
        self.columns
            .get(name)
            .unwrap_or_else(|| panic!("fixture has no column {name}"))
    }

    /// The invocations a probe would have recorded for `table`: each slot
    /// gets the recorded duration of its function (every function of the
    /// fixture is called from one parent only), or 0 for functions the
    /// fixture does not time (clock_gettime: its time then falls into
    /// img of the parent, as for any unmeasured code).
    pub(crate) fn invocations(&self, table: &ChildTable) -> Vec<Invocation> {
        let root = self.column("root");
        (0..self.invocations)
            .map(|i| Invocation {
                root_ns: root[i],
                children_ns: table
                    .slots
                    .iter()
                    .map(|s| self.columns.get(&s.function).map_or(0, |c| c[i]))
                    .collect(),
            })
            .collect()
    }
}

/// Runs the fixture (`mode` = "flat" or "deep") for `n` invocations.
pub fn run(binary: &Path, mode: &str, n: usize) -> Records {
    // One file per run: tests run in parallel and may ask for the same run.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = dir().join(format!("records-{mode}-{n}-{run}.tsv"));
    let status = Command::new(binary)
        .args([mode, &n.to_string()])
        .arg(&out)
        .status()
        .expect("run vprof-target");
    assert!(status.success(), "vprof-target {mode} {n} failed");
    let text = std::fs::read_to_string(&out).expect("read records");
    let mut lines = text.lines();
    let names: Vec<String> = lines
        .next()
        .expect("header")
        .split('\t')
        .map(str::to_owned)
        .collect();
    let mut columns: HashMap<String, Vec<u64>> =
        names.iter().map(|n| (n.clone(), Vec::new())).collect();
    let mut invocations = 0;
    for line in lines {
        for (name, v) in names.iter().zip(line.split('\t')) {
            columns
                .get_mut(name)
                .expect("known column")
                .push(v.parse().expect("integer ns"));
        }
        invocations += 1;
    }
    Records {
        columns,
        invocations,
    }
}
