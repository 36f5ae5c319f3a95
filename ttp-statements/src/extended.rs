//! Statements of the extended query protocol: Parse, Bind, Execute, the
//! messages most drivers send for a parameterised query (JDBC, libpq's
//! `PQexecParams`/`PQexecPrepared`, psycopg 3, pgx, node-postgres with
//! values; `pgbench -M extended|prepared`).
//!
//! PostgreSQL fires `query__start`/`query__done` only in
//! `exec_simple_query`, so these statements have neither. Their Execute
//! message runs the portal through `PortalRun`, which fires the executor
//! pair `query__execute__start/done` for both protocols; outside a
//! simple-protocol statement the probe program takes that pair as the
//! statement (flag `EXTENDED`). Its text is the global
//! `debug_query_string`, which `exec_execute_message` points at the
//! portal's source text before `PortalRun`: the program reads it at a fixed
//! distance from the probe's address, as it reads a parallel worker's name.
//!
//! What the statement spans: the portal's run, which is what
//! pg_stat_statements' `total_exec_time` measures for both protocols. The
//! Parse and Bind messages before it (parsing, planning, and for DML the
//! executor's start) are outside, as they are outside pg_stat_statements'
//! execution time. A client that fetches a portal in pieces (Execute with
//! a row limit, then Execute again) makes one statement per piece, where
//! pg_stat_statements counts one call.
use object::SymbolKind;
use ttp_ledger::probe::symbols::Image;

/// The global that points at the text of the statement being run.
pub(crate) const QUERY_TEXT_GLOBAL: &str = "debug_query_string";

/// The address of [`QUERY_TEXT_GLOBAL`] in `binary` (exported: extensions
/// read it), `None` when it lacks the symbol (the statements are then
/// still measured, without their text).
pub fn query_text_global(binary: &Image) -> Option<u64> {
    let file = binary.parse().ok()?;
    ttp_ledger::probe::symbols::defined_address(&file, QUERY_TEXT_GLOBAL, Some(SymbolKind::Data))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a symbol taken from the wrong table or kind: the server this
    /// machine has exports the global in its dynamic symbols, in a data
    /// segment.
    #[test]
    fn query_text_global_of_the_installed_server() {
        let Some(bin) = crate::installed_server() else {
            return;
        };
        let at = query_text_global(&Image::read(&bin).unwrap()).expect("debug_query_string");
        let data = std::fs::read(&bin).unwrap();
        let file = object::File::parse(&*data).unwrap();
        use object::{Object, ObjectSegment, ObjectSymbol};
        let sym = file
            .dynamic_symbols()
            .find(|s| s.name() == Ok(QUERY_TEXT_GLOBAL))
            .unwrap();
        assert_eq!(at, sym.address());
        assert_eq!(sym.size(), 8, "a pointer");
        assert!(
            file.segments()
                .any(|s| s.address() <= at && at + 8 <= s.address() + s.size()),
            "inside a loaded segment"
        );
        let not_a_server = Image::read(std::path::Path::new("/bin/true")).unwrap();
        assert_eq!(query_text_global(&not_a_server), None);
    }
}
