//! `ttp-ebpf`: the command users run. Parsing, dispatch and exit codes live in
//! `ttp_user::cli`; this file only wires them to the process.
fn main() -> std::process::ExitCode {
    ttp_user::cli::main()
}
