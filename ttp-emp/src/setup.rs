//! Which EMP version a measurement met (Fig. 8 Step 1: the system is set up
//! "along with EMPv1—EMPv4" before EMPv5 removes outliers). The state comes
//! from the `check` snapshot `run --protocol emp` takes before measuring
//! ([`ttp_sys::sys::setup_check::run_checks`], the same report `ttp-ebpf
//! check` prints); this module only sorts its items by EMP version.
//!
//! The versions (Sec. 4.1–4.4, Table I):
//! * EMPv1 — deactivate non-critical daemons and use process time: items
//!   `noncritical_daemons` and `busy_processes` (PT is what ttp measures);
//! * EMPv2 — activate the NTP daemon: `clock_sync`;
//! * EMPv3 — switch off Turbo mode and SpeedStep: `turbo`, `cpufreq`;
//! * EMPv4 — an up-to-date Linux kernel: `kernel`.
//!
//! A version holds when each of its items passed; a warning or a failure,
//! or an item missing from the snapshot, means it does not. Only when all
//! four hold is the result "EMPv5".
use serde::{Deserialize, Serialize};

use ttp_sys::sys::setup_check::{CheckReport, Status};

/// The check items each version asks for, with the paper's words.
pub const VERSIONS: &[(&str, &str, &[&str])] = &[
    (
        "EMPv1",
        "deactivate non-critical daemons (Sec. 4.1)",
        &["noncritical_daemons", "busy_processes"],
    ),
    (
        "EMPv2",
        "activate the NTP daemon (Sec. 4.2)",
        &["clock_sync"],
    ),
    (
        "EMPv3",
        "switch off Turbo mode and SpeedStep (Sec. 4.3)",
        &["turbo", "cpufreq"],
    ),
    (
        "EMPv4",
        "an up-to-date Linux kernel (Sec. 4.4)",
        &["kernel"],
    ),
];

/// A check item that did not pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unmet {
    pub id: String,
    pub title: String,
    /// `None` when the snapshot has no such item.
    pub status: Option<Status>,
    pub detail: String,
}

/// One of EMPv1–v4.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionState {
    pub version: String,
    pub asks: String,
    /// Empty when the version holds.
    pub unmet: Vec<Unmet>,
}

impl VersionState {
    pub fn met(&self) -> bool {
        self.unmet.is_empty()
    }
}

/// The set-up state of a measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmpSetup {
    /// EMPv1–v4, in order.
    pub versions: Vec<VersionState>,
    /// The `check` snapshot they were read from (schema `ttp.check/1`).
    pub check: CheckReport,
}

impl EmpSetup {
    pub fn from_check(check: CheckReport) -> Self {
        let versions = VERSIONS
            .iter()
            .map(|&(version, asks, ids)| VersionState {
                version: version.to_string(),
                asks: asks.to_string(),
                unmet: ids
                    .iter()
                    .filter_map(|&id| match check.items.iter().find(|i| i.id == id) {
                        Some(i) if i.status == Status::Pass => None,
                        Some(i) => Some(Unmet {
                            id: id.to_string(),
                            title: i.title.clone(),
                            status: Some(i.status),
                            detail: i.detail.clone(),
                        }),
                        None => Some(Unmet {
                            id: id.to_string(),
                            title: id.to_string(),
                            status: None,
                            detail: "not in the check snapshot".to_string(),
                        }),
                    })
                    .collect(),
            })
            .collect();
        Self { versions, check }
    }

    /// EMPv1–v4 all hold: the measurement is EMPv5.
    pub(crate) fn met(&self) -> bool {
        self.versions.iter().all(VersionState::met)
    }

    /// The versions that do not hold, e.g. ["EMPv1", "EMPv3"].
    pub(crate) fn unmet_versions(&self) -> Vec<&str> {
        self.versions
            .iter()
            .filter(|v| !v.met())
            .map(|v| v.version.as_str())
            .collect()
    }
}

/// The protocol a result may claim: "EMPv5" only when EMPv1–v4 held;
/// otherwise what was applied and what was not (Fig. 8).
pub fn version_label(setup: Option<&EmpSetup>) -> String {
    match setup {
        Some(s) if s.met() => "EMPv5".to_string(),
        Some(s) => format!(
            "EMPv5's outlier removal, not EMPv5: set-up of {} not met",
            s.unmet_versions().join(", ")
        ),
        None => "EMPv5's outlier removal; EMPv1–v4 set-up not recorded".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ttp_sys::sys::setup_check::CheckItem;

    fn item(id: &str, status: Status) -> CheckItem {
        CheckItem {
            id: id.into(),
            title: format!("title of {id}"),
            source: "test".into(),
            status,
            detail: format!("detail of {id}"),
            remedy: None,
            fix: None,
        }
    }

    /// Through JSON, as a saved `ttp.check/1` file is read, so fields the
    /// report gains later keep their defaults.
    fn report(items: Vec<CheckItem>) -> CheckReport {
        serde_json::from_value(serde_json::json!({
            "schema": ttp_sys::sys::setup_check::SCHEMA,
            "root": "/",
            "sample_ms": 1000,
            "items": items,
        }))
        .expect("a check report")
    }

    fn all_pass() -> Vec<CheckItem> {
        VERSIONS
            .iter()
            .flat_map(|(_, _, ids)| ids.iter())
            .map(|id| item(id, Status::Pass))
            .chain([item("virtualization", Status::Warn)])
            .collect()
    }

    /// Every EMPv1–v4 item passed: "EMPv5", whatever other items say
    /// (virtualisation is not one of EMPv1–v4). Catches a label that
    /// depends on items outside the four versions.
    #[test]
    fn all_four_versions_make_empv5() {
        let s = EmpSetup::from_check(report(all_pass()));
        assert!(s.met());
        assert_eq!(version_label(Some(&s)), "EMPv5");
    }

    /// Turbo on (warn) and a missing clock item: EMPv2 and EMPv3 fail, and
    /// the label says so. Catches a warning treated as met, a missing item
    /// treated as met, or "EMPv5" claimed anyway.
    #[test]
    fn unmet_versions_are_listed() {
        let mut items = all_pass();
        items.retain(|i| i.id != "clock_sync");
        items.iter_mut().find(|i| i.id == "turbo").unwrap().status = Status::Warn;
        let s = EmpSetup::from_check(report(items));
        assert!(!s.met());
        assert_eq!(s.unmet_versions(), ["EMPv2", "EMPv3"]);
        let v3 = &s.versions[2];
        assert_eq!(v3.unmet.len(), 1);
        assert_eq!(
            (v3.unmet[0].id.as_str(), v3.unmet[0].status),
            ("turbo", Some(Status::Warn))
        );
        assert_eq!(s.versions[1].unmet[0].status, None);
        let label = version_label(Some(&s));
        assert_eq!(
            label,
            "EMPv5's outlier removal, not EMPv5: set-up of EMPv2, EMPv3 not met"
        );
        assert!(version_label(None).contains("not recorded"));
    }
}
