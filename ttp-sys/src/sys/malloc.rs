//! glibc's allocator set for a command that runs for hours beside fork
//! storms (`attach`; docs/attach.md, "Memory of a long run").
//!
//! Left at its defaults, glibc keeps what a burst freed: each thread that
//! allocates gets an arena of its own (the exit-record thread's held the
//! records of the largest storm), and freeing a large block raises the
//! size below which blocks come from the heap instead of their own
//! mapping (the "dynamic mmap threshold", mallopt(3)), so the next burst's
//! buffers land in the heap and stay there, fragmented, after they are
//! freed. Each storm then left a step of RSS that never came back.

/// Blocks of at least this size get a mapping of their own, given back to
/// the kernel when freed: glibc's own starting threshold (128 KiB), made
/// fixed (setting it turns the dynamic threshold off).
const MMAP_THRESHOLD: i32 = 128 * 1024;

/// One arena for every thread and a fixed mmap threshold. Call before the
/// command starts threads.
pub fn for_long_runs() {
    // SAFETY: mallopt with integer settings, before the threads start.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}

/// Hands free heap pages back to the kernel (malloc_trim(3)): what a burst
/// freed in the middle of the heap, which glibc only trims at its top.
pub fn trim() {
    // SAFETY: malloc_trim has no preconditions.
    unsafe { libc::malloc_trim(0) };
}
