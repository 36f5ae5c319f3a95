//! Fails early, with the remedy, when bpf-linker is missing.
fn main() {
    if which::which("bpf-linker").is_err() {
        println!("cargo:warning=bpf-linker not found; run `cargo xtask setup`");
    }
}
