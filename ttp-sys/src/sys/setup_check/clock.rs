//! Clock synchronisation (EMPv2, Sec. 4.2 and App. D: with the NTP daemon
//! active, PT varies less; TTPv2 Step 0 (3e)).
use super::{
    item::{CheckItem, Probes, Status},
    read::ProcSample,
};

/// adjtimex(2) `timex.status` bit: clock not synchronised.
const STA_UNSYNC: i32 = 0x0040;
/// adjtimex(2) return value: clock not synchronised.
const TIME_ERROR: i32 = 5;

/// Process names (comm, ≤ 15 bytes) of time-synchronisation daemons.
pub(crate) const SYNC_DAEMONS: &[&str] = &[
    "ntpd",
    "chronyd",
    "systemd-timesyn",
    "openntpd",
    "ptp4l",
    "phc2sys",
];

pub(crate) fn sync(probes: &dyn Probes, procs: &[ProcSample]) -> CheckItem {
    let (id, title) = ("clock_sync", "Clock synchronisation (NTP)");
    let src = "EMPv2 (Sec. 4.2): activate the NTP daemon; TTPv2 Step 0 (3e)";
    let daemons: Vec<String> = procs
        .iter()
        .filter(|p| SYNC_DAEMONS.contains(&p.comm.as_str()))
        .map(|p| format!("{} [{}]", p.comm, p.pid))
        .collect();
    let running = if daemons.is_empty() {
        "no NTP daemon visible".to_string()
    } else {
        format!("running: {}", daemons.join(", "))
    };
    let remedy = "timedatectl set-ntp true, or start chronyd / ntpd";
    let Some(c) = probes.adjtimex() else {
        return CheckItem::new(
            id,
            title,
            src,
            Status::Warn,
            format!("adjtimex failed; {running}"),
        )
        .remedy(remedy);
    };
    let synced = c.status & STA_UNSYNC == 0 && c.state != TIME_ERROR;
    let detail = format!(
        "kernel clock {} (adjtimex state {}, maxerror {} µs, esterror {} µs); {running}",
        if synced {
            "synchronised"
        } else {
            "not synchronised (STA_UNSYNC)"
        },
        c.state,
        c.maxerror_us,
        c.esterror_us
    );
    if synced && !daemons.is_empty() {
        CheckItem::new(id, title, src, Status::Pass, detail)
    } else if synced {
        // In a container the host's daemon disciplines the shared clock.
        CheckItem::new(id, title, src, Status::Warn, detail)
            .remedy("the clock is synchronised by something not visible here (the host?); EMPv2 asks for an NTP daemon on the measuring machine")
    } else {
        CheckItem::new(id, title, src, Status::Warn, detail).remedy(remedy)
    }
}
