//! Other work beside a measurement, as CI must survive it.
use super::{fixture, temp_path};

/// Other work beside a measurement, as CI must survive it: two CPU burners
/// and a disk writer (O_DIRECT, so its waits are iowait). Killed on drop.
pub struct Beside {
    children: Vec<std::process::Child>,
    file: std::path::PathBuf,
}

pub fn load_beside() -> Beside {
    use std::{os::unix::process::CommandExt, process::Command, process::Stdio};
    let mut children = Vec::new();
    for _ in 0..2 {
        children.push(
            Command::new(fixture("fixture-spin"))
                .args(["--cpu-ms", "600000"])
                .stdout(Stdio::null())
                .spawn()
                .expect("start a CPU burner"),
        );
    }
    let file = temp_path("beside-writer.dat");
    children.push(
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while :; do dd if=/dev/zero of={} bs=64K count=256 oflag=direct conv=notrunc status=none; done",
                file.display()
            ))
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start a disk writer"),
    );
    Beside { children, file }
}

impl Drop for Beside {
    fn drop(&mut self) {
        for c in &mut self.children {
            // SAFETY: plain syscall; the writer leads its own process group
            // (its dd too), the burners are single processes.
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(&self.file);
    }
}
