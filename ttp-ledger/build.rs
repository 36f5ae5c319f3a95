//! Builds the eBPF object (crate `ttp-ebpf`, target bpfel-unknown-none) into
//! OUT_DIR so that `cargo build`/`cargo install --path ttp-user` give a
//! working binary. With `AYA_BUILD_SKIP=1` an empty object is written instead:
//! analysis code then builds and tests without the eBPF toolchain, and loading
//! the probes fails at run time with a message that says how to rebuild.
use std::{
    env, fs,
    path::{Path, PathBuf},
};

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
    share_ebpf_target(&out);
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "ttp-ebpf",
            root_dir: ebpf_dir,
            ..Default::default()
        }],
        aya_build::Toolchain::Nightly,
    )
}

/// aya-build gives every OUT_DIR a cargo target directory of its own
/// (`OUT_DIR/aya-build/target/ttp-ebpf`), so each profile and feature set
/// that runs this script (clippy, `build --bins`, the test build, a release
/// build) compiled the same object again: 40–80 s and ~190 MB each. It is
/// built the same way every time (`--release` for the BPF target, the same
/// flags), so that directory is made a link to one beside the profiles'
/// (`target/ttp-ebpf-object`): the first build compiles it, the others find
/// it fresh by cargo's own fingerprints, and two at once wait on cargo's
/// lock of that directory. Where OUT_DIR is not laid out as cargo's
/// `<target>/<profile>/build/<crate>/out`, nothing is linked.
fn share_ebpf_target(out: &Path) {
    let mut up = out.ancestors();
    let (Some(build), Some(target)) = (up.nth(2), up.nth(1)) else {
        return;
    };
    if build.file_name() != Some("build".as_ref()) {
        return;
    }
    let link = out.join("aya-build/target/ttp-ebpf");
    let shared = target.join("ttp-ebpf-object");
    // A link made in another target directory (one copied, or a checkout
    // moved) would build this tree's object into that directory, beside
    // another tree's: it is made again to point at this one's.
    match fs::read_link(&link) {
        Ok(to) if to == shared => return,
        Ok(_) => {
            let _ = fs::remove_file(&link);
        }
        Err(_) if link.symlink_metadata().is_ok() => return,
        Err(_) => {}
    }
    if let Some(parent) = link.parent()
        && fs::create_dir_all(&shared).is_ok()
        && fs::create_dir_all(parent).is_ok()
    {
        let _ = std::os::unix::fs::symlink(&shared, &link);
    }
}
