#!/usr/bin/env python3
"""Where a BPF program spends its time: by callee and by instruction.

The kernel's BPF statistics give a program's run time and runs, not where
inside it the time goes. This script samples the whole machine while a
workload runs and charges each sample that lands in (or below) a program
whose name starts with PREFIX:

- by callee: the program's own instructions ("self") or the helper or
  kernel function it called (`bpf_probe_read_user`, the hash walk
  `lookup_nulls_elem_raw`, the clock, ...), and by call site (the offset
  the call returns to, in the image below: which of two lookups it was);
- by instruction: the program's JIT image (read through the bpf syscall
  while the workload runs) disassembled with objdump, each instruction
  with the samples that landed on it, the hottest shown with the
  instructions before them. A timer sample lands on the instruction after
  the one that stalled: a count on the instruction after a load is that
  load's cache miss, one after a call is the return.

Usage (as root, with the tracer already attached and measuring):
  bpf-profile.py PREFIX [--hot N] -- WORKLOAD...
e.g. `bpf-profile.py stmt_sock -- pgbench -n -c 4 -j 2 -T 10 postgres`
beside `ttp-ebpf statements --pid $PM`. perf (cpu-clock, 19 999 Hz, call
chains) and objdump must be installed; `kernel.bpf_jit_kallsyms` must be
1 (the default) for perf to name the programs.
"""
import collections
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import bpfprogs  # docs/examples/bpfprogs.py

HZ = 19999


def jit_images(prefix):
    """{name: JIT image bytes} of the loaded programs named PREFIX*."""
    return {name: bpfprogs.jit_image(fd, raw) for _, name, fd, raw in bpfprogs.programs() if name.startswith(prefix)}


def strip(frame):
    return re.sub(r"\+0x[0-9a-f]+$", "", frame)


def samples(data):
    """Each sample's frames, leaf first, as `symbol+offset`."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym,symoff"],
                         capture_output=True, text=True, check=True).stdout
    for block in out.split("\n\n"):
        frames = [line.split(None, 1)[1] for line in block.strip().splitlines() if len(line.split(None, 1)) > 1]
        if frames:
            yield frames


def main():
    args = sys.argv[1:]
    if "--" not in args or args.index("--") < 1:
        sys.exit(__doc__)
    prefix, workload = args[0], args[args.index("--") + 1:]
    hot = int(args[args.index("--hot") + 1]) if "--hot" in args[:args.index("--")] else 12
    images = {}
    # The images are read while the workload runs: the tracer may replace
    # its programs at start-up.
    timer = threading.Timer(2.0, lambda: images.update(jit_images(prefix)))
    timer.start()
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        t0 = time.time()
        subprocess.run(["perf", "record", "-q", "-g", "-a", "-F", str(HZ), "-o", data, "--"] + workload, check=True)
        timer.join()
        wall = time.time() - t0
        callee = collections.defaultdict(collections.Counter)
        sites = collections.defaultdict(collections.Counter)
        offsets = collections.defaultdict(collections.Counter)
        for frames in samples(data):
            for i, f in enumerate(frames):
                m = re.match(r"bpf_prog_[0-9a-f]+_(\w+)\+0x([0-9a-f]+)$", f)
                if m and m.group(1).startswith(prefix):
                    name = m.group(1)
                    callee[name]["self" if i == 0 else strip(frames[i - 1])] += 1
                    if i == 0:
                        offsets[name][int(m.group(2), 16)] += 1
                    else:
                        sites[name][(strip(frames[i - 1]), int(m.group(2), 16))] += 1
                    break
    print(f"{wall:.1f} s of workload, {HZ} samples a second a CPU")
    for name in sorted(callee):
        total = sum(callee[name].values())
        print(f"\n{name}: {total} samples ({total / HZ * 1e3:.1f} ms of CPU), by callee:")
        for c, n in callee[name].most_common(10):
            print(f"  {n:6d} {100 * n / total:5.1f} %  {c}")
        print("  by call site (the callee, then the instruction the call returns to):")
        for (c, off), n in sites[name].most_common(6):
            print(f"  {n:6d} {100 * n / total:5.1f} %  {c} -> +{off:x}")
        if name not in images:
            print("  (no JIT image read: the program was not loaded 2 s into the workload)")
            continue
        with tempfile.NamedTemporaryFile(suffix=".bin") as f:
            f.write(images[name])
            f.flush()
            dis = subprocess.run(["objdump", "-D", "-b", "binary", "-mi386:x86-64", f.name],
                                 capture_output=True, text=True, check=True).stdout
        lines = []
        for line in dis.splitlines():
            m = re.match(r"\s+([0-9a-f]+):\s+(.*)", line)
            if m:
                lines.append((int(m.group(1), 16), m.group(2)))
        own = offsets[name]
        print(f"  hottest instructions of its own ({sum(own.values())} samples; JIT image {len(images[name])} B):")
        for off, n in own.most_common(hot):
            at = next((k for k, (o, _) in enumerate(lines) if o == off), None)
            if at is None:
                continue
            for o, text in lines[max(0, at - 3):at + 1]:
                print(f"  {own.get(o, 0):6d}  {o:5x}: {text}")
            print("  " + "-" * 40)


if __name__ == "__main__":
    main()
