//! Free page reporting: a VM's balloon driver (virtio-balloon with its
//! REPORTING feature) hands blocks of free guest memory of at least
//! `page_reporting_order` back to the hypervisor, about two seconds after
//! they are freed, and the host discards their contents. The next touch
//! of such a page (a new page-cache page for a file read, a first write
//! to an anonymous page) faults in the host, which the guest sees as
//! system time where the touch happened.
//!
//! That is a cost of the machine's history, not of the command: after
//! `--cold-cache` drops the page cache, whether the next QE's reads land
//! on reported memory depends on how far reporting got meanwhile. On this
//! project's 2-vCPU VM, `fixture-query` reading a 192 MiB file cold took
//! 0.31–0.41 s of system time in five of six runs with reporting as the
//! VM had it (order 9), and 0.07–0.09 s in five of six with the order held
//! at 10 (docs/ttpv2.md, "The first execution's one-time cost").
//!
//! So the commands that repeat executions (`run`, its EMP protocol and
//! `run --postgres`) hold the order at its largest while they measure
//! (sys/held.rs: restored when the last instance ends, and by the next ttp
//! command after a SIGKILL), where a device reports: the largest order
//! the kernel takes (upstream's limit is `MAX_PAGE_ORDER`, 10 on x86-64;
//! this project's VM kernel takes 11, above any block, so nothing is
//! reported). Blocks of order 10 are rare just after a drop of the page
//! cache, so little is reported either way. Where the order cannot be
//! held, the report says so among the run's deviations (TTPv2 Sec. 9 (6)).
use std::path::Path;

use super::{held::Held, run_state};

/// The module's parameters, relative to the root.
const PARAMS: &str = "sys/module/page_reporting/parameters";
/// Virtio-balloon devices, relative to the root.
const BALLOONS: &str = "sys/bus/virtio/drivers/virtio_balloon";
/// VIRTIO_BALLOON_F_REPORTING: the feature bit of free page reporting.
const F_REPORTING: usize = 5;

/// Free page reporting as the machine under `root` has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// `page_reporting_order`: blocks of this order and larger are reported.
    pub order: String,
    /// A virtio-balloon device with the REPORTING feature is bound.
    pub device: bool,
    /// What has been reported since boot, where the kernel counts it
    /// (`reported_kib`, not in every kernel).
    pub reported_kib: Option<u64>,
}

/// The state under `root` (`/` for this machine); None without the module.
pub fn state(root: &Path) -> Option<State> {
    let params = root.join(PARAMS);
    let order = std::fs::read_to_string(params.join("page_reporting_order")).ok()?;
    let reported_kib = std::fs::read_to_string(params.join("reported_kib"))
        .ok()
        .and_then(|s| s.trim().parse().ok());
    Some(State {
        order: order.trim().to_string(),
        device: reporting_device(root),
        reported_kib,
    })
}

/// Whether a bound virtio-balloon device negotiated free page reporting:
/// its `features` file is one character a feature bit, bit 0 first.
fn reporting_device(root: &Path) -> bool {
    let Ok(dir) = std::fs::read_dir(root.join(BALLOONS)) else {
        return false;
    };
    dir.flatten().any(|e| {
        std::fs::read_to_string(e.path().join("features"))
            .is_ok_and(|f| f.as_bytes().get(F_REPORTING) == Some(&b'1'))
    })
}

/// The orders tried, largest first: the kernel takes the first that is at
/// most its `MAX_PAGE_ORDER`.
const ORDERS: [&str; 6] = ["15", "14", "13", "12", "11", "10"];

/// What a measurement did about free page reporting.
pub enum PageReporting {
    /// No device reports free pages: nothing to hold.
    Off,
    /// Held at the largest order while this value lives.
    Held(Box<Held>),
    /// A device reports, and the order could not be held (not root, the
    /// kernel refused every order): the warning said why.
    NotHeld { order: String },
}

impl PageReporting {
    /// Holds the order at its largest where a device reports.
    pub fn hold() -> Self {
        let Some(s) = state(Path::new("/")).filter(|s| s.device) else {
            return Self::Off;
        };
        let held = Held::hold(
            run_state::page_reporting_order(),
            &ORDERS,
            "QEs may carry the system time of memory the hypervisor took back",
        );
        match held {
            Some(h) => {
                if let Some(l) = h.leftover() {
                    log::warn!("{l}");
                }
                Self::Held(Box::new(h))
            }
            None => Self::NotHeld { order: s.order },
        }
    }

    /// The sentence TTPv2's paragraph (6) carries (Sec. 9: deviations and
    /// what was done to the machine), if any.
    pub fn statement(&self) -> Option<String> {
        match self {
            Self::Off => None,
            Self::Held(h) if h.changed() => Some(format!(
                "the VM's free page reporting to its hypervisor was held at order {} (from {}) while the run measured, so that memory the guest frees (a dropped page cache among it) is not taken back by the host and faulted in again inside a QE as system time",
                h.held_at(),
                h.previous()
            )),
            Self::Held(h) => Some(format!(
                "the VM's free page reporting to its hypervisor was already at order {}, the largest, while the run measured",
                h.held_at()
            )),
            Self::NotHeld { order } => Some(format!(
                "the VM hands free memory of order {order} and larger back to its hypervisor (free page reporting) and it could not be held off: a QE that touches such memory again carries system time that is the hypervisor's"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(order: &str, features: Option<&str>) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(PARAMS);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("page_reporting_order"), format!("{order}\n")).unwrap();
        if let Some(f) = features {
            let dev = d.path().join(BALLOONS).join("virtio0");
            std::fs::create_dir_all(&dev).unwrap();
            std::fs::write(dev.join("features"), format!("{f}\n")).unwrap();
        }
        d
    }

    /// Catches reading the wrong feature bit: bit 5 is REPORTING, bits 1
    /// and 2 (statistics, deflate on OOM) are not.
    #[test]
    fn the_reporting_feature_bit_decides() {
        let on = machine("9", Some("0110010100000000"));
        let s = state(on.path()).unwrap();
        assert_eq!((s.order.as_str(), s.device), ("9", true));
        assert_eq!(s.reported_kib, None);
        let off = machine("9", Some("0110000100000000"));
        assert!(!state(off.path()).unwrap().device);
        let none = machine("9", None);
        assert!(!state(none.path()).unwrap().device);
        assert!(state(Path::new("/nonexistent")).is_none());
    }

    /// Catches a hold that records one order and sets another, or a failed
    /// order left recorded: the first value the kernel takes is recorded.
    #[test]
    fn the_largest_accepted_order_is_held_and_restored() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("page_reporting_order");
        std::fs::write(&path, "9\n").unwrap();
        let t = run_state::Tracked {
            id: "page_reporting_order",
            setting: "page_reporting.page_reporting_order",
            path: path.clone(),
            dir: d.path().join("run"),
        };
        let h = Held::hold(t.clone(), &ORDERS, "test").unwrap();
        // A file takes any value: the first is held.
        assert_eq!((h.previous(), h.held_at(), h.changed()), ("9", "15", true));
        let c = t.recorded().unwrap().unwrap();
        assert_eq!((c.original.as_str(), c.set_to.as_str()), ("9", "15"));
        let p = PageReporting::Held(Box::new(h));
        assert!(p.statement().unwrap().contains("order 15 (from 9)"));
        drop(p);
        assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), "9");
        assert!(!t.state_path().exists());
    }
}
