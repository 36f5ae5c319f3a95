//! The live [`Probes`]: system calls and helper programs.
use std::{mem, os::fd::FromRawFd, process::Command, time::Duration};

use super::item::{ClockState, Probes};

pub struct LiveProbes;

impl Probes for LiveProbes {
    fn adjtimex(&self) -> Option<ClockState> {
        // SAFETY: a zeroed timex with modes = 0 only reads the state.
        let mut tx: libc::timex = unsafe { mem::zeroed() };
        let state = unsafe { libc::adjtimex(&mut tx) };
        (state >= 0).then_some(ClockState {
            state,
            status: tx.status,
            maxerror_us: tx.maxerror as i64,
            esterror_us: tx.esterror as i64,
        })
    }

    fn taskstats_family(&self) -> Result<u16, String> {
        genl_family_id("TASKSTATS")
    }

    fn detect_virt(&self) -> Option<String> {
        // Exit status 1 with "none" means bare metal; absent tool → None.
        let out = Command::new("systemd-detect-virt").output().ok()?;
        let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Some(if s.is_empty() { "none".into() } else { s })
    }

    fn user_hz(&self) -> Option<u64> {
        // SAFETY: sysconf has no memory effects.
        let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        (v > 0).then_some(v as u64)
    }

    fn pause(&self, d: Duration) -> Duration {
        let t0 = std::time::Instant::now();
        std::thread::sleep(d);
        t0.elapsed()
    }

    fn own_pid(&self) -> u32 {
        std::process::id()
    }

    fn bpf_stats(&self) -> Result<(), String> {
        // The fd is closed at once: counting is on only while it is open.
        aya::sys::enable_stats(aya::sys::Stats::RunTime)
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

// Generic netlink controller constants (linux/genetlink.h).
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NLMSG_HDRLEN: usize = 16;
const GENL_HDRLEN: usize = 4;

const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Asks the generic netlink controller for a family's id (what taskstats
/// clients do first). Needs no privilege.
pub(crate) fn genl_family_id(name: &str) -> Result<u16, String> {
    // SAFETY: plain socket creation; the fd is owned right after.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_GENERIC,
        )
    };
    if fd < 0 {
        return Err(format!(
            "netlink socket: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: fd is a fresh, valid descriptor owned by nobody else.
    let sock = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let raw = std::os::fd::AsRawFd::as_raw_fd(&sock);
    let tv = libc::timeval {
        tv_sec: 1,
        tv_usec: 0,
    };
    // SAFETY: tv outlives the call; size matches.
    unsafe {
        libc::setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            mem::size_of::<libc::timeval>() as u32,
        );
    }
    let mut attr_data = name.as_bytes().to_vec();
    attr_data.push(0);
    let attr_len = 4 + attr_data.len();
    let total = NLMSG_HDRLEN + GENL_HDRLEN + align4(attr_len);
    let mut msg = Vec::with_capacity(total);
    msg.extend((total as u32).to_ne_bytes());
    msg.extend(GENL_ID_CTRL.to_ne_bytes());
    msg.extend((libc::NLM_F_REQUEST as u16).to_ne_bytes());
    msg.extend(1u32.to_ne_bytes()); // sequence
    msg.extend(0u32.to_ne_bytes()); // port id: the kernel
    msg.extend([CTRL_CMD_GETFAMILY, 1, 0, 0]); // cmd, version, reserved
    msg.extend((attr_len as u16).to_ne_bytes());
    msg.extend(CTRL_ATTR_FAMILY_NAME.to_ne_bytes());
    msg.extend(&attr_data);
    msg.resize(total, 0);
    // SAFETY: zeroed sockaddr_nl addressed to the kernel (pid 0).
    let mut addr: libc::sockaddr_nl = unsafe { mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as u16;
    // SAFETY: msg and addr are valid for the given lengths.
    let sent = unsafe {
        libc::sendto(
            raw,
            msg.as_ptr().cast(),
            msg.len(),
            0,
            (&addr as *const libc::sockaddr_nl).cast(),
            mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if sent < 0 {
        return Err(format!("netlink send: {}", std::io::Error::last_os_error()));
    }
    let mut buf = vec![0u8; 8192];
    // SAFETY: buf is valid for buf.len() bytes.
    let n = unsafe { libc::recv(raw, buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(format!(
            "netlink receive: {}",
            std::io::Error::last_os_error()
        ));
    }
    parse_family_reply(&buf[..n as usize])
}

/// Parses the controller's answer: an NLMSG_ERROR or a family description.
pub(crate) fn parse_family_reply(b: &[u8]) -> Result<u16, String> {
    let u16_at = |o: usize| b.get(o..o + 2).map(|s| u16::from_ne_bytes([s[0], s[1]]));
    let ty = u16_at(4).ok_or("short netlink reply")?;
    if ty == libc::NLMSG_ERROR as u16 {
        let code = b
            .get(NLMSG_HDRLEN..NLMSG_HDRLEN + 4)
            .map(|s| i32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
            .ok_or("short netlink error")?;
        return Err(format!(
            "kernel answered {}",
            std::io::Error::from_raw_os_error(-code)
        ));
    }
    let end = (u32::from_ne_bytes(
        b.get(0..4)
            .ok_or("short")?
            .try_into()
            .map_err(|_| "short")?,
    ) as usize)
        .min(b.len());
    let mut o = NLMSG_HDRLEN + GENL_HDRLEN;
    while o + 4 <= end {
        let len = u16_at(o).ok_or("short attribute")? as usize;
        let ty = u16_at(o + 2).ok_or("short attribute")? & 0x3fff;
        if len < 4 {
            break;
        }
        if ty == CTRL_ATTR_FAMILY_ID {
            return u16_at(o + 4).ok_or_else(|| "short family id".to_string());
        }
        o += align4(len);
    }
    Err("no family id in the reply".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-built controller reply: family name attribute first, then
    /// the id 0x1a. Catches wrong alignment or attribute-type masking.
    #[test]
    fn parses_family_id_after_other_attributes() {
        let mut m = Vec::new();
        let name = b"TASKSTATS\0"; // attr len 14, padded to 16
        let total = 16 + 4 + 16 + 8;
        m.extend((total as u32).to_ne_bytes());
        m.extend(GENL_ID_CTRL.to_ne_bytes());
        m.extend(0u16.to_ne_bytes());
        m.extend([0u8; 8]);
        m.extend([1u8, 2, 0, 0]);
        m.extend(14u16.to_ne_bytes());
        m.extend(CTRL_ATTR_FAMILY_NAME.to_ne_bytes());
        m.extend(name);
        m.extend([0u8, 0]);
        m.extend(6u16.to_ne_bytes());
        m.extend(CTRL_ATTR_FAMILY_ID.to_ne_bytes());
        m.extend(0x1au16.to_ne_bytes());
        m.extend([0u8, 0]);
        assert_eq!(parse_family_reply(&m), Ok(0x1a));
    }

    /// Catches an ENOENT answer being read as a family id.
    #[test]
    fn error_reply_is_an_error() {
        let mut m = Vec::new();
        m.extend(36u32.to_ne_bytes());
        m.extend((libc::NLMSG_ERROR as u16).to_ne_bytes());
        m.extend([0u8; 10]);
        m.extend((-libc::ENOENT).to_ne_bytes());
        m.extend([0u8; 16]);
        assert!(parse_family_reply(&m).unwrap_err().contains("No such file"));
    }
}
