//! Emptying the operating system's page cache before a cold-cache QE
//! (TTPv2 Sec. 3.1, third step: "flushed the OS-related caches by using the
//! Linux `drop_caches` facility").

/// Writes dirty pages back (`sync`), then drops the clean ones: only clean
/// pages can be dropped, so without the sync a freshly written table would
/// stay cached. Needs root.
pub fn drop_page_cache() -> std::io::Result<()> {
    // SAFETY: plain syscall without arguments.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3")
}
