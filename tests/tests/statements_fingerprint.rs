//! `statements` on a server that computes no query ids (a plain cluster:
//! `compute_query_id = auto` without pg_stat_statements): the kernel keys
//! the sums by the text's fingerprint, computed in the program
//! (ttp_common::fingerprint). Truths: pgbench's own count of what it sent,
//! and ttp's userspace fingerprint of the texts.
use crate::{
    common::{
        self,
        pg::{Cluster, TPCB, pgbench_tables},
    },
    statements_socket::{group, n, pgbench, statements, stop},
};

use ttp_common::fingerprint::string_hash;
use ttp_statements::fingerprint::fingerprint;

/// After attach, `pgbench -c 2 -t 500` (TPC-B-like) in each query mode on
/// a plain cluster. Every statement of the script is counted exactly
/// 1000 times (pgbench's count: 2 clients × 500 transactions), in one
/// group keyed by one in-kernel fingerprint, whose value is the hash of
/// the userspace fingerprint of the group's text; and every group's
/// kernel fingerprint is the hash of its texts' userspace fingerprint
/// (where userspace has the whole text: pgbench's own catalog query at
/// its start is longer than the 255 bytes sent).
/// So the kernel's keys partition the statements as the userspace
/// fingerprints do. Catches: the kernel splitting one fingerprint's texts
/// (two keys: no single hash, or calls short), merging two (calls over
/// 1000, a text's fingerprint not its key's), or hashing other bytes than
/// userspace's fingerprint writes.
#[test]
fn kernel_fingerprints_group_as_userspace_in_every_query_mode() {
    if !common::root_or_skip("kernel_fingerprints_group_as_userspace_in_every_query_mode") {
        return;
    }
    let _serial = common::serial();
    let c = Cluster::start("sock-fp");
    pgbench_tables(&c);
    for mode in ["simple", "extended", "prepared"] {
        let (ttp, json) = statements(&c, &format!("fp-{mode}.json"), &[]);
        pgbench(&c, None, &[], &["-n", "-c", "2", "-t", "500", "-M", mode]);
        let (text, doc) = stop(ttp, &json);
        let entry = doc["status_entry"].as_str().unwrap();
        assert!(
            entry.contains("no query ids: keyed by the fingerprint computed in the kernel"),
            "{entry}"
        );
        for key in TPCB {
            let g = group(&doc, key).unwrap_or_else(|| panic!("{mode}: no group {key}"));
            assert_eq!(n(g, "calls"), 1000, "{mode}: {key}: {g}");
            assert_eq!(g["kernel_key"], "fingerprint", "{mode}: {key}");
            assert_eq!(
                g["fingerprint_hash"].as_str(),
                Some(format!("{:016x}", string_hash(key)).as_str()),
                "{mode}: {key}: one kernel key, the hash of the fingerprint"
            );
            assert!(g["queryid"].is_null(), "{mode}: {key}");
        }
        let mut fingerprinted = 0;
        for g in doc["groups"].as_array().unwrap() {
            let Some(h) = g["fingerprint_hash"].as_str() else {
                continue;
            };
            let (key, example) = (g["key"].as_str().unwrap(), g["example"].as_str().unwrap());
            // A text cut at 255 bytes for userspace was fingerprinted whole
            // (up to 1024 bytes) in the kernel.
            if n(g, "truncated") > 0 {
                continue;
            }
            assert_eq!(fingerprint(example), key, "{mode}: {g}");
            assert_eq!(h, format!("{:016x}", string_hash(key)), "{mode}: {g}");
            fingerprinted += 1;
        }
        assert!(fingerprinted >= TPCB.len(), "{mode}: {fingerprinted}");
        assert!(
            text.contains("computed in the kernel (no query id)"),
            "{mode}: {text}"
        );
    }
}
