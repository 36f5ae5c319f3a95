//! An infrequent, long-running "daemon" for EMP's first sanity check: it
//! sleeps until a byte arrives on `--trigger DIR`/go (fixture-spin sends
//! one in chosen executions), burns `--burn-ms` of its own CPU time, appends
//! that CPU time in ns to `--log FILE`, and answers with a byte on
//! `DIR/done`. Its process name (`fixture-noisyd`, or `--comm NAME`, at
//! most 15 bytes) is what a cut-off profile names. `--pin CPU` pins it.
//! Prints "ready" once the FIFOs exist.
use std::{
    ffi::CString,
    fs::{File, OpenOptions},
    io::{Read, Write},
    os::unix::ffi::OsStrExt,
    path::{Path, PathBuf},
    time::Duration,
};

fn mkfifo(p: &Path) -> std::io::Result<()> {
    let c = CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: valid NUL-terminated path.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } == 0 {
        Ok(())
    } else {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            Ok(())
        } else {
            Err(e)
        }
    }
}

fn main() -> std::io::Result<()> {
    let pin: i64 = ttp_tests::arg("--pin", -1);
    if pin >= 0 {
        ttp_tests::pin_to_cpu(pin as usize)?;
    }
    let comm: String = ttp_tests::arg("--comm", String::new());
    if !comm.is_empty() {
        let c = CString::new(comm).map_err(std::io::Error::other)?;
        // SAFETY: PR_SET_NAME reads a NUL-terminated string (the kernel
        // keeps its first 15 bytes) and renames the calling thread, here the
        // process's only thread.
        if unsafe { libc::prctl(libc::PR_SET_NAME, c.as_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    let burn_ms: u64 = ttp_tests::arg("--burn-ms", 60);
    let dir = PathBuf::from(ttp_tests::arg("--trigger", String::from(".")));
    let log_path = PathBuf::from(ttp_tests::arg("--log", String::from("noisyd.log")));
    mkfifo(&dir.join("go"))?;
    mkfifo(&dir.join("done"))?;
    // Read-write opens never block and never see end-of-file when a writer
    // goes away (Linux fifo(7)).
    let mut go = File::options()
        .read(true)
        .write(true)
        .open(dir.join("go"))?;
    let mut done = File::options()
        .read(true)
        .write(true)
        .open(dir.join("done"))?;
    println!("ready");
    std::io::stdout().flush()?;
    let mut b = [0u8; 1];
    while go.read_exact(&mut b).is_ok() {
        let used = ttp_tests::burn(Duration::from_millis(burn_ms));
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)?;
        writeln!(log, "{}", used.as_nanos())?;
        done.write_all(b"d")?;
    }
    Ok(())
}
