//! `run --cpu LIST`: the measured command pinned to a set of CPUs with
//! sched_setaffinity(2) in the child before exec, so the command and every
//! process it forks run only there (affinity is inherited across fork and
//! exec). The list syntax is the kernel's cpulist (`0`, `1,3`, `0-2,5`), as
//! `taskset -c` and /sys/devices/system/cpu/online write it.
use std::{fmt, io};

/// A validated, sorted set of CPU numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(Vec<u32>);

/// Why a `--cpu` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    #[error("--cpu {0:?} is not a CPU list: give CPU numbers and ranges such as 1, 0,2 or 0-3")]
    Syntax(String),
    #[error(
        "--cpu {list:?}: CPU {cpu} is not one ttp may run on (allowed: {allowed}); see /sys/devices/system/cpu/online"
    )]
    NotAllowed {
        list: String,
        cpu: u32,
        allowed: CpuList,
    },
}

impl CpuList {
    /// Parses a cpulist (`0-2,5`), without checking the CPUs exist.
    pub(crate) fn parse(s: &str) -> Result<Self, CpuListError> {
        let bad = || CpuListError::Syntax(s.to_string());
        let mut cpus = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (a.trim(), b.trim()),
                None => (part, part),
            };
            let lo: u32 = lo.parse().map_err(|_| bad())?;
            let hi: u32 = hi.parse().map_err(|_| bad())?;
            // CPU_SETSIZE: the largest set sched_setaffinity takes here.
            if lo > hi || hi as usize >= libc::CPU_SETSIZE as usize {
                return Err(bad());
            }
            cpus.extend(lo..=hi);
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(Self(cpus))
    }

    /// Parses `s` and checks every CPU is in `allowed` (ttp's own affinity:
    /// online CPUs it may use).
    pub fn parse_within(s: &str, allowed: &CpuList) -> Result<Self, CpuListError> {
        let list = Self::parse(s)?;
        match list.0.iter().find(|c| !allowed.0.contains(c)) {
            Some(&cpu) => Err(CpuListError::NotAllowed {
                list: s.to_string(),
                cpu,
                allowed: allowed.clone(),
            }),
            None => Ok(list),
        }
    }

    /// The CPUs this process may run on (sched_getaffinity).
    pub fn current() -> io::Result<Self> {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
        // fills it for the calling thread.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self(
            (0..libc::CPU_SETSIZE as u32)
                // SAFETY: the index is below CPU_SETSIZE.
                .filter(|&c| unsafe { libc::CPU_ISSET(c as usize, &set) })
                .collect(),
        ))
    }

    pub fn cpus(&self) -> &[u32] {
        &self.0
    }

    /// Pins the calling process; meant for a child between fork and exec
    /// (no allocation, async-signal-safe calls only).
    pub fn pin_self(&self) -> io::Result<()> {
        self.pin(0)
    }

    /// Pins thread `tid` (0: the caller), as `taskset -p` does; no
    /// allocation, so it is safe between fork and exec too.
    pub fn pin(&self, tid: u32) -> io::Result<()> {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET indices
        // were checked below CPU_SETSIZE at parse time.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in &self.0 {
            unsafe { libc::CPU_SET(c as usize, &mut set) };
        }
        // SAFETY: one valid cpu_set_t of the size given.
        let rc = unsafe { libc::sched_setaffinity(tid as i32, size_of::<libc::cpu_set_t>(), &set) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// The kernel's cpulist form: `0-2,5`.
impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            parts.push(if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            });
            i += 1;
        }
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cpulist forms taskset accepts, normalised; malformed lists and
    /// CPUs outside the allowed set refused. Catches "1-3" read as one
    /// CPU, a reversed range accepted, and a pin to an offline CPU.
    #[test]
    fn cpu_lists_parse_and_print_as_the_kernel_writes_them() {
        let l = CpuList::parse("3, 0-1,1").unwrap();
        assert_eq!(l.cpus(), [0, 1, 3]);
        assert_eq!(l.to_string(), "0-1,3");
        for bad in ["", "a", "2-1", "1,", "-1", "0-99999"] {
            assert!(CpuList::parse(bad).is_err(), "{bad:?}");
        }
        let allowed = CpuList::parse("0-1").unwrap();
        assert!(CpuList::parse_within("1", &allowed).is_ok());
        let e = CpuList::parse_within("0,2", &allowed).unwrap_err();
        assert!(e.to_string().contains("CPU 2 is not one"), "{e}");
    }

    /// A child pinned to the first CPU ttp may use sees exactly that CPU
    /// in its own /proc status (the kernel's view). Catches a pin that is
    /// not applied or not inherited across exec.
    #[test]
    fn a_pinned_child_sees_only_its_cpu() {
        use std::os::unix::process::CommandExt;
        let first = CpuList::current().unwrap().cpus()[0];
        let pin = CpuList::parse(&first.to_string()).unwrap();
        let mut cmd = std::process::Command::new("grep");
        cmd.args(["Cpus_allowed_list", "/proc/self/status"]);
        let p = pin.clone();
        // SAFETY: pin_self only calls sched_setaffinity on a stack set.
        unsafe { cmd.pre_exec(move || p.pin_self()) };
        let out = cmd.output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(text.trim(), format!("Cpus_allowed_list:\t{first}"));
    }
}
