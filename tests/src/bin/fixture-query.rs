//! A query-like workload with known behaviour: `fixture-query FILE PASSES`
//! reads all of FILE through the page cache into one buffer (a cold read
//! when the cache was dropped before it), then hashes the buffer PASSES
//! times. Its work is the same in every execution: the file's bytes read
//! once, the buffer's pages touched once, PASSES × the file's size hashed.
//! Prints what it did as JSON on stdout (the hash, so the work cannot be
//! optimised away).
use std::{fs::File, io::Read};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(path), Some(passes)) = (args.next(), args.next()) else {
        eprintln!("usage: fixture-query FILE PASSES");
        std::process::exit(2);
    };
    let passes: u32 = passes.parse().unwrap_or_else(|_| {
        eprintln!("PASSES must be a number, got {passes}");
        std::process::exit(2);
    });
    let mut f = File::open(&path).unwrap_or_else(|e| {
        eprintln!("cannot open {path}: {e}");
        std::process::exit(2);
    });
    let len = f.metadata().map(|m| m.len() as usize).unwrap_or(0);
    let mut buf = Vec::with_capacity(len);
    f.read_to_end(&mut buf).expect("read");
    // FNV-1a over 8-byte words, PASSES times, each pass seeded by the last.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for _ in 0..passes {
        for w in buf.chunks_exact(8) {
            h ^= u64::from_le_bytes(w.try_into().unwrap());
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    println!(
        r#"{{"bytes": {}, "passes": {passes}, "hash": {h}}}"#,
        buf.len()
    );
}
