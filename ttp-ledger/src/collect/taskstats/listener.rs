//! The exit listener: TTPv2's ProcListen thread (Sec. 7.1 events (2) and
//! (16)–(17), App. B). The kernel sends the final taskstats of every exiting
//! task to the listeners registered on the CPU where it exits
//! (`taskstats_exit` → `send_cpu_listeners`), so the listener registers a
//! cpumask covering every CPU on its own socket, drains that socket on its
//! own thread and hands records over a channel.
//!
//! TTPv2 Sec. 3.6 warns that the netlink receive buffer "is not robust when
//! a number of processes' statistics are delivered": the buffer is sized
//! generously, and every overflow the kernel reports (ENOBUFS: at least one
//! message was dropped) is counted in [`ListenerStats::overflows`] so that a
//! measurement with lost exits can be flagged rather than trusted.
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;

use neli::consts::nl::{NlmF, Nlmsg};
use neli::consts::socket::NlFamily;
use neli::err::SocketError;
use neli::nl::{NlPayload, Nlmsghdr, NlmsghdrBuilder};
use neli::socket::synchronous::NlSocketHandle;
use neli::utils::Groups;

use super::{
    client::{Genl, TaskstatsRecord, decode_message, delayacct_on, family_id, get_command, uapi},
    error::TaskstatsError,
    record::Origin,
};

/// Receive buffer asked for (SO_RCVBUFFORCE, which root may use beyond
/// net.core.rmem_max; else SO_RCVBUF, capped there). One exit message is
/// about 0.9 KB with its skb overhead; 16 MiB holds some 15,000 of them.
const RCVBUF_BYTES: usize = 16 << 20;

/// Counters of one listener, as a snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ListenerStats {
    /// Netlink messages received.
    pub messages: u64,
    /// Records delivered on the channel (a message carries one per-task
    /// record, plus a thread-group record when a multi-threaded process's
    /// last thread exits).
    pub records: u64,
    /// Times the kernel reported that the socket's receive buffer
    /// overflowed (ENOBUFS). Each means one or more exit records were lost.
    pub overflows: u64,
    /// Messages that could not be decoded.
    pub decode_errors: u64,
    /// Receive buffer the kernel granted, in bytes (as SO_RCVBUF reports it,
    /// doubled for its bookkeeping).
    pub rcvbuf_bytes: u64,
}

#[derive(Default)]
struct Counters {
    messages: AtomicU64,
    records: AtomicU64,
    overflows: AtomicU64,
    decode_errors: AtomicU64,
}

/// A registered exit listener. Records arrive on the receiver returned by
/// [`ExitListener::start`]; dropping the listener stops its thread and
/// deregisters the cpumask.
pub struct ExitListener {
    stop: Option<OwnedFd>,
    thread: Option<JoinHandle<NlSocketHandle>>,
    counters: Arc<Counters>,
    rcvbuf_bytes: u64,
    family: u16,
    cpulist: String,
}

impl ExitListener {
    /// Registers for exit records on every possible CPU (so CPUs brought
    /// online later are covered too; falls back to the online CPUs) and
    /// starts the receiving thread. Needs CAP_NET_ADMIN. Returns once the
    /// kernel has acknowledged the registration: every task that exits
    /// after this returns is reported.
    pub fn start() -> Result<(ExitListener, Receiver<TaskstatsRecord>), TaskstatsError> {
        let cpulist = [
            "/sys/devices/system/cpu/possible",
            "/sys/devices/system/cpu/online",
        ]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_string())
        .ok_or_else(|| TaskstatsError::Netlink("cannot read the CPU list from /sys".into()))?;
        Self::start_on(&cpulist)
    }

    /// Like [`start`](Self::start), on the CPUs of `cpulist` (the kernel's
    /// list format, e.g. `0-3,6`).
    pub(crate) fn start_on(
        cpulist: &str,
    ) -> Result<(ExitListener, Receiver<TaskstatsRecord>), TaskstatsError> {
        let family = family_id()?;
        let socket = NlSocketHandle::connect(NlFamily::Generic, None, Groups::empty())
            .map_err(|e| TaskstatsError::Netlink(e.to_string()))?;
        let rcvbuf_bytes = size_receive_buffer(&socket);
        let (tx, rx) = channel();
        let counters = Arc::new(Counters::default());

        send_cpumask(
            &socket,
            family,
            uapi::CMD_ATTR_REGISTER_CPUMASK,
            cpulist,
            true,
        )?;
        wait_for_ack(&socket, &tx, &counters)?;

        let (stop_r, stop_w) = pipe()?;
        let thread_counters = Arc::clone(&counters);
        let thread = std::thread::Builder::new()
            .name("ttp-exits".into())
            .spawn(move || {
                receive_loop(&socket, &stop_r, &tx, &thread_counters);
                socket
            })
            .map_err(TaskstatsError::Thread)?;
        let listener = ExitListener {
            stop: Some(stop_w),
            thread: Some(thread),
            counters,
            rcvbuf_bytes,
            family,
            cpulist: cpulist.to_string(),
        };
        Ok((listener, rx))
    }

    /// Counters so far.
    pub fn stats(&self) -> ListenerStats {
        let c = &self.counters;
        ListenerStats {
            messages: c.messages.load(Ordering::Relaxed),
            records: c.records.load(Ordering::Relaxed),
            overflows: c.overflows.load(Ordering::Relaxed),
            decode_errors: c.decode_errors.load(Ordering::Relaxed),
            rcvbuf_bytes: self.rcvbuf_bytes,
        }
    }
}

impl Drop for ExitListener {
    fn drop(&mut self) {
        // Closing the write end wakes the thread (its poll sees POLLHUP).
        drop(self.stop.take());
        let Some(thread) = self.thread.take() else {
            return;
        };
        match thread.join() {
            Ok(socket) => {
                if let Err(e) = send_cpumask(
                    &socket,
                    self.family,
                    uapi::CMD_ATTR_DEREGISTER_CPUMASK,
                    &self.cpulist,
                    false,
                ) {
                    // The kernel also drops a listener whose socket is closed
                    // the next time it tries to send to it.
                    log::warn!("could not deregister the taskstats exit listener: {e}");
                }
            }
            Err(_) => log::warn!("the taskstats exit listener thread panicked"),
        }
    }
}

fn size_receive_buffer(socket: &NlSocketHandle) -> u64 {
    let fd = socket.as_raw_fd();
    let size = libc::c_int::try_from(RCVBUF_BYTES).unwrap_or(libc::c_int::MAX);
    let set = |opt| {
        // SAFETY: fd is a valid socket owned by `socket`; the option value
        // is a c_int read by the kernel for the given length.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        }
    };
    if set(libc::SO_RCVBUFFORCE) != 0 && set(libc::SO_RCVBUF) != 0 {
        log::warn!(
            "could not enlarge the taskstats receive buffer: {}",
            io::Error::last_os_error()
        );
    }
    let mut granted: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: as above; the kernel writes at most `len` bytes into `granted`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&mut granted as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        u64::try_from(granted).unwrap_or(0)
    } else {
        0
    }
}

/// Sequence number of the registration request, to match its ACK.
const REGISTER_SEQ: u32 = 1;

fn send_cpumask(
    socket: &NlSocketHandle,
    family: u16,
    attr: u16,
    cpulist: &str,
    ack: bool,
) -> Result<(), TaskstatsError> {
    let genl = get_command(attr, cpulist)?;
    let flags = if ack {
        NlmF::REQUEST | NlmF::ACK
    } else {
        NlmF::REQUEST
    };
    let msg = NlmsghdrBuilder::default()
        .nl_type(family)
        .nl_flags(flags)
        .nl_seq(REGISTER_SEQ)
        .nl_pid(socket.pid())
        .nl_payload(NlPayload::Payload(genl))
        .build()
        .map_err(|e| TaskstatsError::Netlink(e.to_string()))?;
    socket
        .send(&msg)
        .map_err(|e| TaskstatsError::Netlink(e.to_string()))
}

/// Reads until the kernel acknowledges the registration. Exit records that
/// arrive first are delivered, not lost.
fn wait_for_ack(
    socket: &NlSocketHandle,
    tx: &Sender<TaskstatsRecord>,
    counters: &Counters,
) -> Result<(), TaskstatsError> {
    loop {
        let (msgs, _) = match socket.recv::<u16, Genl>() {
            Ok(v) => v,
            Err(e) if is_enobufs(&e) => {
                counters.overflows.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            Err(e) => return Err(TaskstatsError::Netlink(e.to_string())),
        };
        for msg in msgs {
            let mut msg = msg.map_err(|e| TaskstatsError::Netlink(e.to_string()))?;
            if *msg.nl_seq() == REGISTER_SEQ && Nlmsg::from(*msg.nl_type()) == Nlmsg::Error {
                if let Some(err) = msg.get_err() {
                    return Err(TaskstatsError::from_errno(-*err.error(), 0));
                }
                return Ok(()); // error 0: the ACK
            }
            deliver(&msg, tx, counters);
        }
    }
}

/// How long the listener trusts its last reading of
/// `kernel.task_delayacct`. A fork storm brings thousands of exit messages
/// a second; reading the sysctl for each of them cost a file open, read
/// and close per message. The setting changes rarely (ttp switches it on
/// before the listener starts), so it is read again only when this long
/// has passed: a change by hand is seen within 100 ms.
const DELAYACCT_REFRESH: std::time::Duration = std::time::Duration::from_millis(100);

thread_local! {
    static DELAYACCT: std::cell::Cell<Option<(std::time::Instant, bool)>> =
        const { std::cell::Cell::new(None) };
}

/// `kernel.task_delayacct`, read at most once per [`DELAYACCT_REFRESH`]
/// on this thread.
fn delayacct_on_cached() -> bool {
    DELAYACCT.with(|c| match c.get() {
        Some((at, on)) if at.elapsed() < DELAYACCT_REFRESH => on,
        _ => {
            let on = delayacct_on();
            c.set(Some((std::time::Instant::now(), on)));
            on
        }
    })
}

fn deliver(msg: &Nlmsghdr<u16, Genl>, tx: &Sender<TaskstatsRecord>, counters: &Counters) {
    let Some(genl) = msg.get_payload() else {
        return;
    };
    if *genl.cmd() != uapi::CMD_NEW {
        return;
    }
    counters.messages.fetch_add(1, Ordering::Relaxed);
    match decode_message(
        genl,
        Origin {
            exit: true,
            delayacct_on: delayacct_on_cached(),
        },
    ) {
        Ok(records) => {
            for r in records {
                counters.records.fetch_add(1, Ordering::Relaxed);
                // A dropped receiver only means nobody wants them any more.
                let _ = tx.send(r);
            }
        }
        Err(e) => {
            counters.decode_errors.fetch_add(1, Ordering::Relaxed);
            log::warn!("undecodable taskstats exit record: {e}");
        }
    }
}

fn is_enobufs(e: &SocketError) -> bool {
    matches!(e, SocketError::Io(io) if io.raw_os_error() == Some(libc::ENOBUFS))
}

fn receive_loop(
    socket: &NlSocketHandle,
    stop: &OwnedFd,
    tx: &Sender<TaskstatsRecord>,
    counters: &Counters,
) {
    loop {
        let mut fds = [
            libc::pollfd {
                fd: socket.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stop.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: fds points to two initialised pollfd structs for the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            log::warn!("taskstats exit listener stopped: poll failed: {e}");
            return;
        }
        if fds[0].revents & libc::POLLIN != 0 && !receive_one(socket, tx, counters) {
            return;
        }
        if fds[1].revents != 0 {
            drain(socket, tx, counters);
            return;
        }
    }
}

/// Receives and delivers one datagram; false when the socket failed.
fn receive_one(socket: &NlSocketHandle, tx: &Sender<TaskstatsRecord>, counters: &Counters) -> bool {
    match socket.recv::<u16, Genl>() {
        Ok((msgs, _)) => {
            for msg in msgs {
                match msg {
                    Ok(msg) => deliver(&msg, tx, counters),
                    Err(e) => {
                        counters.decode_errors.fetch_add(1, Ordering::Relaxed);
                        log::warn!("undecodable taskstats message: {e}");
                    }
                }
            }
            true
        }
        Err(e) if is_enobufs(&e) => {
            counters.overflows.fetch_add(1, Ordering::Relaxed);
            true
        }
        Err(SocketError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => false,
        Err(e) => {
            log::warn!("taskstats exit listener stopped: {e}");
            false
        }
    }
}

/// On stop: delivers what the kernel already queued, without blocking.
/// Bounded, so a flood of exits cannot keep the listener from stopping.
fn drain(socket: &NlSocketHandle, tx: &Sender<TaskstatsRecord>, counters: &Counters) {
    let fd = socket.as_raw_fd();
    // SAFETY: fcntl on a descriptor owned by `socket`, changing only its
    // status flags.
    let nonblocking = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) == 0
    };
    if !nonblocking {
        return;
    }
    for _ in 0..100_000 {
        if !receive_one(socket, tx, counters) {
            break;
        }
    }
    // SAFETY: as above; back to blocking for the deregistration send.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd), TaskstatsError> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array on success.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(TaskstatsError::Thread(io::Error::last_os_error()));
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}
