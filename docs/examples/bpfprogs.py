"""The loaded BPF programs, through the bpf syscall (no bpftool needed).

Shared by bpf-profile.py and statements-attribution.py: `programs()` walks
every loaded program (BPF_PROG_GET_NEXT_ID, BPF_PROG_GET_FD_BY_ID) and gives
each one's id, name, open descriptor and `struct bpf_prog_info`; the
descriptor is closed when the walk moves on.
"""
import ctypes
import os
import re
import struct

SYS_BPF = 321  # x86-64
BPF_PROG_GET_NEXT_ID, BPF_PROG_GET_FD_BY_ID, BPF_OBJ_GET_INFO_BY_FD = 11, 13, 15
INFO_BYTES = 256
libc = ctypes.CDLL(None, use_errno=True)


def bpf(cmd, attr):
    """The syscall's result and its attribute buffer (as the kernel left it)."""
    buf = ctypes.create_string_buffer(attr, 128)
    return libc.syscall(SYS_BPF, cmd, buf, 128), buf


def info(fd, ask=None):
    """The program's bpf_prog_info; `ask` (bytes) presets fields that ask the
    kernel for more, e.g. a buffer for the JIT image."""
    out = ctypes.create_string_buffer(ask or b"", INFO_BYTES)
    bpf(BPF_OBJ_GET_INFO_BY_FD, struct.pack("IIQ", fd, INFO_BYTES, ctypes.addressof(out)))
    return out.raw


def programs():
    """(id, name, fd, info bytes) of every loaded program."""
    prog_id = 0
    while True:
        r, buf = bpf(BPF_PROG_GET_NEXT_ID, struct.pack("II", prog_id, 0))
        if r < 0:
            return
        prog_id = struct.unpack_from("II", buf.raw)[1]
        fd, _ = bpf(BPF_PROG_GET_FD_BY_ID, struct.pack("I", prog_id))
        if fd < 0:
            continue
        try:
            raw = info(fd)
            yield prog_id, raw[64:80].split(b"\0")[0].decode(errors="replace"), fd, raw  # bpf_prog_info.name
        finally:
            os.close(fd)


def run_stats():
    """{id: (name, run_time_ns, run_cnt)}: the kernel's BPF statistics
    (counted while kernel.bpf_stats_enabled is 1)."""
    out = {}
    for prog_id, name, fd, _ in programs():
        fields = dict(re.findall(r"^(\w+):\s+(\S+)", open(f"/proc/self/fdinfo/{fd}").read(), re.M))
        out[prog_id] = (name, int(fields.get("run_time_ns", 0)), int(fields.get("run_cnt", 0)))
    return out


def jit_image(fd, raw):
    """The program's JIT image (bytes), from its info `raw`."""
    jited_len = struct.unpack_from("I", raw, 16)[0]  # .jited_prog_len
    if not jited_len:
        return b""
    image = ctypes.create_string_buffer(jited_len)
    ask = bytearray(INFO_BYTES)
    struct.pack_into("I", ask, 16, jited_len)
    struct.pack_into("Q", ask, 24, ctypes.addressof(image))  # .jited_prog_insns
    info(fd, bytes(ask))
    return image.raw
