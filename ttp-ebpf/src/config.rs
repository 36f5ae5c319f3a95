//! What the loader chose that programs of several files read: read-only
//! globals it sets before load. Each read is volatile, so the compiler
//! does not fold the 0 a global is declared with (the verifier does, from
//! the frozen read-only map, and drops the path not taken).

/// 1 when the loader enabled tracing.
#[unsafe(no_mangle)]
static TRACE_ON: u32 = 0;

/// 1: a record a statement too (`--each`, `--usdt`, serve).
#[unsafe(no_mangle)]
static STMT_EACH: u32 = 0;

#[inline(always)]
fn global(v: &'static u32) -> u32 {
    // SAFETY: a plain read of a global the loader wrote before load.
    unsafe { core::ptr::read_volatile(v) }
}

/// Whether `--trace` records the traced processes' events (trace.rs).
#[inline(always)]
pub(crate) fn trace_on() -> bool {
    global(&TRACE_ON) != 0
}

/// Whether a record a statement is sent too (sums.rs, wire.rs).
#[inline(always)]
pub(crate) fn statements_each() -> bool {
    global(&STMT_EACH) != 0
}
