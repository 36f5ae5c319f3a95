//! Attaching a uprobe program at a USDT probe with its semaphore counted by
//! the kernel: `perf_event_open` on the uprobe PMU with `ref_ctr_offset`
//! (Linux ≥ 4.20), then a BPF link carrying the cookie.
//!
//! aya 0.14's `UProbe::attach` has no way to pass `ref_ctr_offset`, so the
//! event is opened here. With it, the kernel increments the probe's
//! semaphore in every process that maps the binary, now and in processes
//! started later, and decrements it when the event is closed: nothing is
//! written into the server's memory by ttp, and a ttp that dies leaves the
//! semaphores as they were (the kernel drops the count with the last fd).
use std::{
    ffi::CString,
    io,
    os::{
        fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd},
        unix::ffi::OsStrExt,
    },
    path::Path,
};

const UPROBE_PMU_TYPE: &str = "/sys/bus/event_source/devices/uprobe/type";
const REF_CTR_FORMAT: &str = "/sys/bus/event_source/devices/uprobe/format/ref_ctr_offset";
const RETPROBE_FORMAT: &str = "/sys/bus/event_source/devices/uprobe/format/retprobe";
/// `PERF_FLAG_FD_CLOEXEC` (include/uapi/linux/perf_event.h).
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// `BPF_LINK_CREATE` (include/uapi/linux/bpf.h, enum bpf_cmd).
const BPF_LINK_CREATE: libc::c_long = 28;
/// `BPF_PERF_EVENT` (enum bpf_attach_type).
const BPF_PERF_EVENT: u32 = 41;

/// One attached probe site: closing both fds detaches it and gives the
/// semaphore count back.
#[derive(Debug)]
pub(crate) struct UsdtLink {
    _link: OwnedFd,
    _perf: OwnedFd,
}

/// How the uprobe PMU takes its parameters on this kernel.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UprobePmu {
    pub pmu_type: u32,
    /// Bit of `config` where `ref_ctr_offset` starts; `None` when the
    /// kernel has no reference counters (then probes with semaphores fire
    /// only if the program enables them itself).
    pub ref_ctr_shift: Option<u32>,
    /// Bit of `config` that makes the event a uretprobe (`None`: the
    /// kernel offers none through the PMU).
    pub retprobe_bit: Option<u32>,
}

impl UprobePmu {
    pub fn read() -> io::Result<Self> {
        let pmu_type = std::fs::read_to_string(UPROBE_PMU_TYPE)?
            .trim()
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{e}")))?;
        let ref_ctr_shift = std::fs::read_to_string(REF_CTR_FORMAT)
            .ok()
            .and_then(|s| parse_format_shift(&s));
        let retprobe_bit = std::fs::read_to_string(RETPROBE_FORMAT)
            .ok()
            .and_then(|s| parse_format_shift(&s));
        Ok(Self {
            pmu_type,
            ref_ctr_shift,
            retprobe_bit,
        })
    }
}

/// First bit of a PMU format string such as `config:32-63`.
fn parse_format_shift(s: &str) -> Option<u32> {
    let bits = s.trim().strip_prefix("config:")?;
    bits.split('-').next()?.parse().ok()
}

/// Where and how a uprobe is attached.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Site {
    /// File offset of the probed instruction.
    pub offset: u64,
    /// File offset of the semaphore the kernel counts (0: none).
    pub ref_ctr: u64,
    /// For `bpf_get_attach_cookie`.
    pub cookie: u64,
    /// A uretprobe: the program runs when the function at `offset` returns.
    pub ret: bool,
}

/// Attaches `prog` at `site` of `binary` for every process (present and
/// future).
pub fn attach(
    pmu: &UprobePmu,
    prog: BorrowedFd<'_>,
    binary: &Path,
    site: Site,
) -> io::Result<UsdtLink> {
    let Site {
        offset,
        ref_ctr,
        cookie,
        ret,
    } = site;
    let path = CString::new(binary.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // struct perf_event_attr, PERF_ATTR_SIZE_VER8 (136 bytes), built by
    // offset: type 0, size 4, config 8, config1 56, config2 64.
    let mut attr = [0u64; 17];
    attr[0] = u64::from(pmu.pmu_type) | ((std::mem::size_of_val(&attr) as u64) << 32);
    if ref_ctr != 0 {
        let Some(shift) = pmu.ref_ctr_shift else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this kernel's uprobes have no reference counter (ref_ctr_offset, Linux ≥ 4.20)",
            ));
        };
        attr[1] = ref_ctr << shift;
    }
    if ret {
        let Some(bit) = pmu.retprobe_bit else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this kernel's uprobe PMU has no retprobe format bit",
            ));
        };
        attr[1] |= 1 << bit;
    }
    attr[7] = path.as_ptr() as u64;
    attr[8] = offset;
    // pid -1, cpu 0: every process; a uprobe runs its BPF program on
    // whichever CPU hits it (the cpu only filters perf's own samples).
    // SAFETY: a valid attr of the size it declares, a NUL-terminated path
    // that outlives the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            -1 as libc::pid_t,
            0 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd this process owns.
    let perf = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // union bpf_attr, link_create: prog_fd, target_fd, attach_type, flags,
    // then perf_event.bpf_cookie.
    let mut la = [0u32; 16];
    la[0] = prog.as_raw_fd() as u32;
    la[1] = perf.as_raw_fd() as u32;
    la[2] = BPF_PERF_EVENT;
    la[4] = cookie as u32;
    la[5] = (cookie >> 32) as u32;
    // SAFETY: a zero-padded bpf_attr of the size passed.
    let link = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_LINK_CREATE,
            la.as_ptr(),
            std::mem::size_of_val(&la) as u32,
        )
    };
    if link < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(UsdtLink {
        // SAFETY: a new fd this process owns.
        _link: unsafe { OwnedFd::from_raw_fd(link as i32) },
        _perf: perf,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a misread PMU format (the shift the kernel documents in
    /// sysfs, `config:32-63` on x86-64).
    #[test]
    fn format_shift() {
        assert_eq!(parse_format_shift("config:32-63\n"), Some(32));
        assert_eq!(parse_format_shift("config1:0-63"), None);
    }
}
