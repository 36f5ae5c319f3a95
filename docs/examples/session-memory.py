#!/usr/bin/env python3
# What one ttp command holds while it measures (docs/benchmarks.md, "The
# maps a command does not use").
# Usage: session-memory.py TTP LABEL -- ARGS...   (as root; bpftool)
#   e.g. session-memory.py target/release/ttp-ebpf st -- statements --pid PM --duration 5s
# Starts TTP ARGS under /usr/bin/time; once it says it measures, sums
# bytes_memlock of the BPF maps it holds (map ids from its fds' fdinfo,
# sizes from `bpftool -j map show`) and reads its VmRSS; then its max RSS.
import json, os, subprocess, sys, time, re
ttp, label = sys.argv[1], sys.argv[2]
args = sys.argv[4:]
tout = f"/tmp/ttp-session-memory-{label}"
p = subprocess.Popen(["/usr/bin/time", "-f", "%e %U %S %M", "-o", tout, ttp] + args,
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
# the ttp child of /usr/bin/time
while True:
    line = p.stderr.readline()
    if not line or "measuring" in line.lower() or "attached" in line.lower():
        break
time.sleep(0.3)
kids = open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()
pid = int(kids[0])
ids = set()
for fd in os.listdir(f"/proc/{pid}/fd"):
    try:
        info = open(f"/proc/{pid}/fdinfo/{fd}").read()
    except OSError:
        continue
    m = re.search(r"^map_id:\s+(\d+)", info, re.M)
    if m:
        ids.add(int(m.group(1)))
rss = [l for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS")][0].split()[1]
maps = [m for m in json.loads(subprocess.check_output(["bpftool", "-j", "map", "show"])) if m["id"] in ids]
total = sum(m.get("bytes_memlock", 0) for m in maps)
big = sorted(maps, key=lambda m: -m.get("bytes_memlock", 0))[:40]
p.stderr.read(); p.wait()
e, u, s, mx = open(tout).read().split()[-4:]
print(f"{label}: maps {len(maps)} memlock {total/2**20:.1f} MiB; VmRSS measuring {int(rss)/1024:.1f} MiB; max RSS {int(mx)/1024:.1f} MiB; cpu {float(u)+float(s):.2f} s")
print("   largest: " + ", ".join(f"{m['name']} {m['bytes_memlock']/2**20:.2f}" for m in big if m["bytes_memlock"] > 20000))
