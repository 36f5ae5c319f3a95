//! The errors of loading and reading the ledger.

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(
        "no kernel BTF at {path}: ttp needs a kernel built with CONFIG_DEBUG_INFO_BTF=y (check `ttp-ebpf check`)"
    )]
    NoBtf { path: String },
    #[error("cannot parse kernel BTF at {path}: {reason}")]
    BadBtf { path: String, reason: String },
    #[error("kernel BTF has no field {field}: this kernel's layout is not supported")]
    MissingField { field: String },
    #[error(
        "this ttp-ebpf was built without its eBPF object (AYA_BUILD_SKIP); rebuild with `cargo build -p ttp-user`"
    )]
    NoObject,
    #[error(
        "loading the eBPF programs was refused ({source}): run as root (sudo) or grant CAP_BPF and CAP_PERFMON"
    )]
    NotPermitted {
        #[source]
        source: Box<aya::EbpfError>,
    },
    #[error("loading the eBPF object failed")]
    Load(#[source] Box<aya::EbpfError>),
    #[error("program {program} missing from the eBPF object")]
    MissingProgram { program: String },
    #[error("map {map} missing from the eBPF object")]
    MissingMap { map: String },
    #[error("program {program} (tracepoint {tracepoint}) failed to load or attach")]
    Program {
        program: String,
        tracepoint: String,
        #[source]
        source: Box<aya::programs::ProgramError>,
    },
    #[error("tracing was not enabled when the ledger was loaded")]
    TraceOff,
    #[error(
        "cannot trace process {tgid}: {source} (at most {max} processes are traced at once)",
        max = ttp_common::trace::MAX_TRACED
    )]
    Traced {
        tgid: u32,
        #[source]
        source: Box<aya::maps::MapError>,
    },
    #[error("attaching the trace sampler to CPU {cpu} failed")]
    Sampler {
        cpu: u32,
        #[source]
        source: Box<aya::programs::ProgramError>,
    },
    #[error("map {map}: {source}")]
    Map {
        map: String,
        #[source]
        source: Box<aya::maps::MapError>,
    },
}
