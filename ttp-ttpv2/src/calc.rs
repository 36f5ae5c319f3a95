//! Step 4 (Sec. 8.5): the query time of each QE from its measures: the
//! paper's eq. 1–2, the eq. 3 generalisation, and the exact counterparts
//! from the kernel ledger.
use serde::{Deserialize, Serialize};

use super::ephemeral::{Ephemeral, ephemeral};
use super::model::Setup;
use ttp_window::window::record::{Measures, ProcessClass, QeRecord};

/// Eq. 1 (Sec. 8.5): `IO_calc = BlockIO_query − 0.5 × IOWait`, in ticks.
/// 0.5 is the paper's assumption that during an IOWait tick exactly one
/// other process waits, so half of those ticks serve someone else.
pub(crate) fn io_calc_ticks(blkio_query_ticks: u64, iowait_ticks: u64) -> f64 {
    io_calc_with_others_fraction(blkio_query_ticks, iowait_ticks, 0.5)
}

/// Eq. 1 with the 0.5 replaced by `others_fraction`, the fraction of the
/// IOWait ticks during which the disk served other processes (Sec. 8.5,
/// "the fraction 1/2 in equation 1 is replaced by an expression").
pub(crate) fn io_calc_with_others_fraction(
    blkio_query_ticks: u64,
    iowait_ticks: u64,
    others_fraction: f64,
) -> f64 {
    blkio_query_ticks as f64 - others_fraction * iowait_ticks as f64
}

/// Eq. 2 (Sec. 8.5): `Time_calc = (S_query + U_query + IO_calc) × tick`,
/// tick = 10 ms at USER_HZ 100.
pub(crate) fn time_calc_ms(su_query_ticks: u64, io_calc_ticks: f64, tick_ms: f64) -> f64 {
    (su_query_ticks as f64 + io_calc_ticks) * tick_ms
}

/// Eq. 3 (Sec. 8.5) estimates a process's part of IOWait in proportion to
/// its BlockIO among the query, utility and daemon processes; the part of
/// IOWait that is *not* the query's, in place of eq. 1's 0.5, is then
/// `(BlockIO_utility + BlockIO_daemon) / (BlockIO_query + BlockIO_utility +
/// BlockIO_daemon)`. With one other process doing as much I/O as the query
/// this is eq. 1's 0.5. Zero when nobody was blocked on I/O.
pub(crate) fn others_fraction_eq3(blkio_query: u64, blkio_utility: u64, blkio_daemon: u64) -> f64 {
    // In f64: counts read from a file may be anything up to u64::MAX.
    let others = blkio_utility as f64 + blkio_daemon as f64;
    let total = blkio_query as f64 + others;
    if total == 0.0 { 0.0 } else { others / total }
}

/// The measured counterpart of eq. 1's 0.5: the part of the machine's
/// iowait that was not the query's share (ledger `iowait_share_ns` of the
/// query over the machine's iowait ns). `None` when the machine had no
/// measured iowait (the fraction is undefined).
pub(crate) fn others_fraction_measured(query_share_ns: u64, machine_iowait_ns: u64) -> Option<f64> {
    (machine_iowait_ns > 0)
        .then(|| 1.0 - (query_share_ns as f64 / machine_iowait_ns as f64).min(1.0))
}

/// The exact query time from the ledger: CPU time plus the time the query
/// waited while the disk served its own I/O, which is what eq. 1 estimates.
pub(crate) fn time_exact_ms(on_cpu_ns: u64, iowait_own_ns: u64) -> f64 {
    (on_cpu_ns as f64 + iowait_own_ns as f64) / 1e6
}

/// Everything Step 4 derives for one QE. Serialised beside the record in
/// `qes[]` of the run JSON.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QeCalc {
    /// The query measures: summed over the query process(es).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<Measures>,
    /// Eq. 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_calc_ticks: Option<f64>,
    /// Eq. 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_calc_ms: Option<f64>,
    /// Eq. 3's estimate of the part of IOWait that served other processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_fraction_eq3: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_calc_eq3_ticks: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_calc_eq3_ms: Option<f64>,
    /// The ledger's measured part of IOWait that was not the query's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_fraction_measured: Option<f64>,
    /// Eq. 1 with the measured fraction in place of 0.5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_calc_share_ticks: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_calc_share_ms: Option<f64>,
    /// Query on-CPU time + own-I/O wait, from the ledger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_exact_ms: Option<f64>,
    /// time_exact_ms − time_calc_ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_minus_calc_ms: Option<f64>,
    /// App. B ephemeral processes, when the sets were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<Ephemeral>,
    /// Number of ephemeral processes (the derived measure X4 expects).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral_processes: Option<u32>,
}

/// Step 4 for one QE.
pub(crate) fn calc_qe(qe: &QeRecord, setup: &Setup) -> QeCalc {
    let tick_ms = setup.tick_ms();
    let query = qe.query();
    let iowait = qe.overall.iowait_ticks;
    let mut c = QeCalc {
        query: query.clone(),
        ..QeCalc::default()
    };
    if let Some(sets) = &qe.process_sets {
        let e = ephemeral(sets);
        c.ephemeral_processes = Some(e.count() as u32);
        c.ephemeral = Some(e);
    } else {
        c.ephemeral_processes = qe.ephemeral_count;
    }
    let Some(q) = query else { return c };
    let su = q.su_ticks();
    if let (Some(su), Some(blk), Some(iow)) = (su, q.blkio_ticks, iowait) {
        let io = io_calc_ticks(blk, iow);
        c.io_calc_ticks = Some(io);
        c.time_calc_ms = Some(time_calc_ms(su, io, tick_ms));
        // Eq. 3 needs the BlockIO of at least one non-query process.
        let others_known = qe
            .processes
            .iter()
            .any(|p| p.class != ProcessClass::Query && p.m.blkio_ticks.is_some());
        let blk_u = qe.class_totals(ProcessClass::Utility).blkio_ticks;
        let blk_d = qe.class_totals(ProcessClass::Daemon).blkio_ticks;
        if let (true, Some(bu), Some(bd)) = (others_known, blk_u, blk_d) {
            let f = others_fraction_eq3(blk, bu, bd);
            let io3 = io_calc_with_others_fraction(blk, iow, f);
            c.others_fraction_eq3 = Some(f);
            c.io_calc_eq3_ticks = Some(io3);
            c.time_calc_eq3_ms = Some(time_calc_ms(su, io3, tick_ms));
        }
        if let (Some(share), Some(machine)) = (q.ledger.iowait_share_ns, qe.overall.iowait_ns) {
            if let Some(f) = others_fraction_measured(share, machine) {
                let ios = io_calc_with_others_fraction(blk, iow, f);
                c.others_fraction_measured = Some(f);
                c.io_calc_share_ticks = Some(ios);
                c.time_calc_share_ms = Some(time_calc_ms(su, ios, tick_ms));
            } else if iow == 0 {
                // No iowait measured or ticked: nothing to apportion.
                c.others_fraction_measured = None;
                c.io_calc_share_ticks = Some(blk as f64);
                c.time_calc_share_ms = Some(time_calc_ms(su, blk as f64, tick_ms));
            }
        }
    }
    if let (Some(cpu), Some(own)) = (q.ledger.on_cpu_ns, q.ledger.iowait_own_ns) {
        let exact = time_exact_ms(cpu, own);
        c.time_exact_ms = Some(exact);
        c.exact_minus_calc_ms = c.time_calc_ms.map(|t| exact - t);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{qe_with, query_proc};

    /// Table XV, QE 3: BlockIO 69, IOWait 43 → IO_calc 47.5; SU 164 →
    /// Time_calc 2115 ms. Catches a wrong sign or factor in eq. 1/2.
    #[test]
    fn equations_1_and_2_table_xv_qe3() {
        let io = io_calc_ticks(69, 43);
        assert_eq!(io, 47.5);
        assert_eq!(time_calc_ms(164, io, 10.0), 2115.0);
    }

    /// With one other process doing as much I/O as the query, eq. 3's
    /// fraction is eq. 1's 0.5; with no other I/O it is 0. Catches using the
    /// query's own share in place of the others'.
    #[test]
    fn eq3_fraction_reduces_to_eq1() {
        assert_eq!(others_fraction_eq3(20, 0, 20), 0.5);
        assert_eq!(others_fraction_eq3(20, 0, 0), 0.0);
        // Hand-computed: 57 query, 1 utility, 15 daemon → 16/73.
        assert!((others_fraction_eq3(57, 1, 15) - 16.0 / 73.0).abs() < 1e-12);
    }

    /// Catches an inverted measured fraction: the query holding all of the
    /// machine's iowait leaves nothing to subtract; half of it gives 0.5.
    #[test]
    fn measured_fraction() {
        assert_eq!(others_fraction_measured(400, 400), Some(0.0));
        assert_eq!(others_fraction_measured(200, 400), Some(0.5));
        assert_eq!(others_fraction_measured(0, 0), None);
    }

    /// A QE built from hand-chosen measures: every derived value checked
    /// against arithmetic done by hand. Catches mixing units (ns vs ticks)
    /// and summing the wrong class.
    #[test]
    fn calc_qe_derives_all_variants() {
        let mut q = query_proc(1, 100, 20, 30);
        q.m.ledger.on_cpu_ns = Some(1_195_000_000);
        q.m.ledger.iowait_own_ns = Some(240_000_000);
        q.m.ledger.iowait_share_ns = Some(150_000_000);
        let mut qe = qe_with(1, 2000.0, vec![q], 10);
        qe.overall.iowait_ns = Some(100_000_000 * 2);
        // A daemon with BlockIO 10 ticks.
        let mut d = query_proc(2, 0, 0, 10);
        d.class = ProcessClass::Daemon;
        qe.processes.push(d);
        let c = calc_qe(&qe, &Setup::default());
        assert_eq!(c.io_calc_ticks, Some(25.0)); // 30 − 0.5·10
        assert_eq!(c.time_calc_ms, Some(1450.0)); // (120 + 25)·10
        assert_eq!(c.others_fraction_eq3, Some(0.25)); // 10 / 40
        assert_eq!(c.io_calc_eq3_ticks, Some(27.5)); // 30 − 0.25·10
        assert_eq!(c.others_fraction_measured, Some(0.25)); // 1 − 150/200
        assert_eq!(c.time_calc_share_ms, Some(1475.0));
        assert_eq!(c.time_exact_ms, Some(1435.0));
        assert_eq!(c.exact_minus_calc_ms, Some(-15.0));
    }

    /// Catches deriving a time for a QE that has no query process.
    #[test]
    fn no_query_no_time() {
        let qe = qe_with(1, 100.0, vec![], 0);
        let c = calc_qe(&qe, &Setup::default());
        assert!(c.query.is_none() && c.time_calc_ms.is_none() && c.time_exact_ms.is_none());
    }
}
