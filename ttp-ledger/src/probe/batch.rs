//! Reading a whole BPF hash map in a few system calls (BPF_MAP_LOOKUP_BATCH,
//! kernel ≥ 5.6). Walking it key by key costs two calls per entry, and a
//! reader that samples every 50 ms (blame) would both load the machine and
//! read entries milliseconds apart; aya 0.14 has no batch operations, hence
//! this. Kernels without batch support for the map type fall back to the
//! key walk.
use std::{
    io,
    mem::size_of,
    os::fd::{AsFd, AsRawFd},
};

use aya::{
    Pod,
    maps::{Array, HashMap, IterableMap, MapData, MapError},
};

/// `enum bpf_cmd` (include/uapi/linux/bpf.h).
const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;

/// The `batch` member of `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// The kernel-internal ENOTSUPP (include/linux/errno.h) that bpf(2) returns
/// for a map type without batch operations.
const ENOTSUPP: i32 = 524;

/// Entries fetched per call at first (more if one hash bucket is larger).
const CHUNK: usize = 1024;

/// Every (key, value) of `map`. Entries deleted meanwhile are left out.
pub(crate) fn hash_entries<K: Pod, V: Pod>(
    map: &HashMap<MapData, K, V>,
) -> Result<Vec<(K, V)>, MapError> {
    match lookup_batch(map.map()) {
        Ok(v) => Ok(v),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EINVAL | libc::EOPNOTSUPP | ENOTSUPP)
            ) =>
        {
            walk(map)
        }
        Err(io_error) => Err(MapError::SyscallError(aya::sys::SyscallError {
            call: "BPF_MAP_LOOKUP_BATCH",
            io_error,
        })),
    }
}

/// Every (index, value) of `array`, in batches as for a hash (arrays have
/// had batch operations since they had any); index by index otherwise.
pub(crate) fn array_entries<V: Pod>(array: &Array<MapData, V>) -> Result<Vec<(u32, V)>, MapError> {
    match lookup_batch(array.map()) {
        Ok(v) => Ok(v),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EINVAL | libc::EOPNOTSUPP | ENOTSUPP)
            ) =>
        {
            (0..array.len())
                .map(|i| array.get(&i, 0).map(|v| (i, v)))
                .collect()
        }
        Err(io_error) => Err(MapError::SyscallError(aya::sys::SyscallError {
            call: "BPF_MAP_LOOKUP_BATCH",
            io_error,
        })),
    }
}

fn walk<K: Pod, V: Pod>(map: &HashMap<MapData, K, V>) -> Result<Vec<(K, V)>, MapError> {
    map.iter()
        .filter_map(|r| match r {
            Ok(kv) => Some(Ok(kv)),
            Err(MapError::KeyNotFound) => None,
            Err(e) => Some(Err(e)),
        })
        .collect()
}

fn lookup_batch<K: Pod, V: Pod>(map: &MapData) -> io::Result<Vec<(K, V)>> {
    let fd = map.fd().as_fd().as_raw_fd() as u32;
    let mut out = Vec::new();
    let mut chunk = CHUNK;
    // The hash map's batch token is a bucket index (u32).
    let mut token_in: u32 = 0;
    let mut token_out: u32 = 0;
    let mut first = true;
    loop {
        let mut keys = vec![0u8; chunk * size_of::<K>()];
        let mut values = vec![0u8; chunk * size_of::<V>()];
        let mut attr = BatchAttr {
            in_batch: if first { 0 } else { &raw mut token_in as u64 },
            out_batch: &raw mut token_out as u64,
            keys: keys.as_mut_ptr() as u64,
            values: values.as_mut_ptr() as u64,
            count: chunk as u32,
            map_fd: fd,
            ..Default::default()
        };
        // SAFETY: the attr points at live buffers sized for `count` entries
        // and at the two tokens; the kernel writes no more than that.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_MAP_LOOKUP_BATCH,
                &raw mut attr,
                size_of::<BatchAttr>() as libc::c_uint,
            )
        };
        let err = (rc < 0).then(io::Error::last_os_error);
        let n = attr.count as usize;
        if err.as_ref().and_then(io::Error::raw_os_error) == Some(libc::ENOSPC) && n == 0 {
            // A bucket holds more entries than the buffer: retry larger.
            chunk *= 2;
            continue;
        }
        for i in 0..n.min(chunk) {
            // SAFETY: the kernel filled `n` keys and values of these sizes;
            // K and V are Pod (any byte pattern is valid); unaligned reads
            // because the byte buffers carry no alignment.
            let (k, v) = unsafe {
                (
                    std::ptr::read_unaligned(keys.as_ptr().add(i * size_of::<K>()) as *const K),
                    std::ptr::read_unaligned(values.as_ptr().add(i * size_of::<V>()) as *const V),
                )
            };
            out.push((k, v));
        }
        match err {
            None => {}
            // The walk reached the end of the map.
            Some(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(out),
            Some(e) => return Err(e),
        }
        token_in = token_out;
        first = false;
    }
}
