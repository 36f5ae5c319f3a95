//! Builds the eBPF object (crate `ttp-ebpf`, target bpfel-unknown-none) into
//! OUT_DIR so that `cargo build`/`cargo install --path ttp-user` give a
//! working binary. With `AYA_BUILD_SKIP=1` an empty object is written instead:
//! analysis code then builds and tests without the eBPF toolchain, and loading
//! the probes fails at run time with a message that says how to rebuild.
use std::{env, fs, path::PathBuf};

fn main() -> anyhow::Result<()> {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let skip = env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    if skip {
        println!("cargo:rerun-if-env-changed=AYA_BUILD_SKIP");
        fs::write(out.join("ttp"), [])?;
        return Ok(());
    }
    let root = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let ebpf_dir = root.join("../ttp-ebpf");
    let ebpf_dir = ebpf_dir.to_str().expect("utf-8 path");
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "ttp-ebpf",
            root_dir: ebpf_dir,
            ..Default::default()
        }],
        aya_build::Toolchain::Nightly,
    )
}
