//! Database and user names for the oids a statement's status entry holds,
//! read without a connection: from the shared catalogs' files in the data
//! directory (`global/1262` is `pg_database`, `global/1260` `pg_authid`),
//! and from the backends' process titles for what the files do not hold
//! yet (a database created since the last checkpoint).
//!
//! A catalog file is a heap of 8 KiB pages (PostgreSQL's
//! `bufpage.h`/`htup_details.h`): a 24-byte page header whose `pd_lower`
//! ends the line pointers (4 bytes each: offset, flags, length), each
//! pointing at a tuple whose 23-byte header holds `t_infomask` at byte 20
//! and the data offset `t_hoff` at byte 22. Both catalogs begin with
//! `oid` (4 bytes) then the name (`NameData`, 64 bytes, NUL-terminated)
//! since PostgreSQL 12. A tuple counts when its insert did not abort and
//! no transaction deleted or replaced it (`HEAP_XMAX_INVALID` set or
//! `xmax` 0): a renamed database's old row is left out.
use std::{collections::HashMap, path::Path};

const PAGE: usize = 8192;
const LP_NORMAL: u32 = 1;
const HEAP_XMIN_INVALID: u16 = 0x0200;
const HEAP_XMAX_INVALID: u16 = 0x0800;
const NAME_LEN: usize = 64;

/// oid → name of the live rows of a catalog heap whose rows begin with
/// (oid, name).
pub(crate) fn oid_names(heap: &[u8]) -> HashMap<u32, String> {
    let mut out = HashMap::new();
    for page in heap.chunks_exact(PAGE) {
        let u16_at = |o: usize| u16::from_le_bytes([page[o], page[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes(page[o..o + 4].try_into().unwrap());
        // pd_pagesize_version: the size in the high byte's bits.
        if usize::from(u16_at(18) & 0xff00) != PAGE {
            continue;
        }
        let lower = usize::from(u16_at(12)).min(PAGE);
        for lp in (24..lower.saturating_sub(3)).step_by(4) {
            let item = u32_at(lp);
            let (off, flags, len) = (
                (item & 0x7fff) as usize,
                (item >> 15) & 3,
                (item >> 17) as usize,
            );
            if flags != LP_NORMAL || off + len > PAGE || len < 24 {
                continue;
            }
            let t = &page[off..off + len];
            let xmax = u32::from_le_bytes(t[4..8].try_into().unwrap());
            let infomask = u16::from_le_bytes([t[20], t[21]]);
            if infomask & HEAP_XMIN_INVALID != 0 || (xmax != 0 && infomask & HEAP_XMAX_INVALID == 0)
            {
                continue;
            }
            let data = usize::from(t[22]);
            let Some(row) = t.get(data..data + 4 + NAME_LEN) else {
                continue;
            };
            let oid = u32::from_le_bytes(row[..4].try_into().unwrap());
            let name = &row[4..];
            let end = name.iter().position(|b| *b == 0).unwrap_or(NAME_LEN);
            out.insert(oid, String::from_utf8_lossy(&name[..end]).into_owned());
        }
    }
    out
}

/// The names of a data directory's databases and roles, from its shared
/// catalogs (empty where a file cannot be read).
pub(crate) fn catalog_names(data: &Path) -> (HashMap<u32, String>, HashMap<u32, String>) {
    let read = |rel: &str| {
        std::fs::read(data.join(rel))
            .map(|b| oid_names(&b))
            .unwrap_or_default()
    };
    (read("global/1262"), read("global/1260"))
}

/// (user, database) from a live backend's process title.
pub(crate) fn title_names(tgid: u32) -> Option<(String, String)> {
    let raw = std::fs::read(format!("/proc/{tgid}/cmdline")).ok()?;
    parse_title(&String::from_utf8_lossy(&raw))
}

/// (user, database) from a backend's process title, such as
/// `postgres: 15/main: alice shop [local] idle` (with `cluster_name`) or
/// `postgres: alice shop 10.0.0.7(51234) SELECT`; `None` for an auxiliary
/// process (`postgres: checkpointer`).
pub(crate) fn parse_title(title: &str) -> Option<(String, String)> {
    let rest = title.trim_end_matches('\0').strip_prefix("postgres: ")?;
    let mut words = rest.split_whitespace().peekable();
    if words.peek().is_some_and(|w| w.ends_with(':')) {
        words.next();
    }
    let user = words.next()?;
    let database = words.next()?;
    // The host word follows; an auxiliary process's title has none.
    words.next()?;
    Some((user.to_string(), database.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One page with the rows given: (oid, name, xmax, infomask).
    fn page(rows: &[(u32, &str, u32, u16)]) -> Vec<u8> {
        let mut p = vec![0u8; PAGE];
        p[18..20].copy_from_slice(&(PAGE as u16 | 4).to_le_bytes());
        let mut upper = PAGE;
        for (i, (oid, name, xmax, infomask)) in rows.iter().enumerate() {
            let hoff = 24usize;
            let len = hoff + 4 + NAME_LEN + 8;
            upper -= len;
            let t = &mut p[upper..upper + len];
            t[4..8].copy_from_slice(&xmax.to_le_bytes());
            t[20..22].copy_from_slice(&infomask.to_le_bytes());
            t[22] = hoff as u8;
            t[hoff..hoff + 4].copy_from_slice(&oid.to_le_bytes());
            t[hoff + 4..hoff + 4 + name.len()].copy_from_slice(name.as_bytes());
            let item = upper as u32 | (LP_NORMAL << 15) | ((len as u32) << 17);
            p[24 + 4 * i..28 + 4 * i].copy_from_slice(&item.to_le_bytes());
        }
        p[12..14].copy_from_slice(&((24 + 4 * rows.len()) as u16).to_le_bytes());
        p
    }

    /// Catches a deleted or replaced row read as live (a renamed
    /// database under its old name), an aborted insert read, and a page
    /// of another size read as 8 KiB.
    #[test]
    fn live_rows_only() {
        let mut heap = page(&[
            (1, "template1", 0, HEAP_XMAX_INVALID),
            (5, "shop_old", 731, 0),
            (5, "shop", 0, 0),
            (7, "aborted", 0, HEAP_XMIN_INVALID),
            (9, "locked_only_hint", 500, HEAP_XMAX_INVALID),
        ]);
        let names = oid_names(&heap);
        assert_eq!(names.get(&1).map(String::as_str), Some("template1"));
        assert_eq!(names.get(&5).map(String::as_str), Some("shop"));
        assert_eq!(names.get(&7), None);
        assert_eq!(names.get(&9).map(String::as_str), Some("locked_only_hint"));
        heap[18] = 0;
        heap[19] = 0x10;
        assert!(oid_names(&heap).is_empty());
        assert!(oid_names(&heap[..100]).is_empty());
    }

    /// Real catalogs where the test machine has a server installed: the
    /// files initdb writes name `template1` (oid 1) and the bootstrap
    /// superuser (oid 10).
    #[test]
    fn a_real_catalog_where_there_is_one() {
        let Some(data) = ["/var/lib/postgresql/15/main", "/var/lib/postgresql/16/main"]
            .iter()
            .map(Path::new)
            .find(|d| d.join("global/1262").exists())
        else {
            eprintln!("no readable data directory here: checked by tests/serve_postgres.rs");
            return;
        };
        let (dbs, users) = catalog_names(data);
        if dbs.is_empty() {
            eprintln!("{} not readable by this user", data.display());
            return;
        }
        assert_eq!(dbs.get(&1).map(String::as_str), Some("template1"));
        assert!(users.contains_key(&10), "{users:?}");
    }

    /// Catches a title read with the cluster name as the user, and an
    /// auxiliary process read as a backend.
    #[test]
    fn titles() {
        assert_eq!(
            parse_title("postgres: 15/main: alice shop [local] idle\0\0"),
            Some(("alice".into(), "shop".into()))
        );
        assert_eq!(
            parse_title("postgres: ttp postgres 127.0.0.1(5432) SELECT"),
            Some(("ttp".into(), "postgres".into()))
        );
        assert_eq!(parse_title("postgres: 15/main: checkpointer"), None);
        assert_eq!(parse_title("postgres: checkpointer"), None);
        assert_eq!(
            parse_title("/usr/lib/postgresql/15/bin/postgres -D x"),
            None
        );
    }
}
