#!/usr/bin/env python3
# Cost a run of the `--irq-time` programs (ttp-ebpf/src/irq.rs) beside
# empty programs at the same tracepoints (xtask/floor/empty_irq.bpf.c),
# by the kernel's BPF statistics, in the same rounds: the floor loader
# holds a BPF_ENABLE_STATS fd for the whole run, `ttp-ebpf attach --all
# --irq-time` runs beside it, and each round reads `bpftool -j prog show`
# before and after a workload of network softirqs on CPU 1 (a loop
# sending UDP datagrams to itself on loopback) and disk interrupts (dd
# with O_DIRECT); per program Δrun_time_ns / Δrun_cnt. docs/ledger-cost.md,
# "Interrupt time".
# Usage (as root): irq-cost.py TTP FLOOR_LOADER FLOOR_OBJECT FILE ROUNDS OUT.json
#   FLOOR_LOADER, FLOOR_OBJECT: xtask/floor/loader.c and empty_irq.bpf.c,
#   built as xtask/src/bench/floor.rs builds the other floors; FILE: a file
#   of at least 80 MB on the disk to read.
import json, subprocess, sys, time
TTP, LOADER, OBJECT, FILE, ROUNDS, OUT = sys.argv[1:7]
NAMES = {"irq_handler_entry", "irq_handler_exit", "softirq_entry", "softirq_exit",
         "local_timer_entry", "local_timer_exit"}
SENDER = """
import socket, time
r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); r.bind(("127.0.0.1", 0)); r.setblocking(False)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
end = time.time() + 4
while time.time() < end:
    for _ in range(64):
        s.sendto(b"x" * 1024, r.getsockname())
        try: r.recv(2048)
        except BlockingIOError: pass
"""
def progs():
    return {p["id"]: p for p in json.loads(subprocess.check_output(["bpftool", "-j", "prog", "show"]))
            if p.get("name") in NAMES}
floor = subprocess.Popen([LOADER, OBJECT, "--stats"], stdout=subprocess.PIPE, text=True)
assert floor.stdout.readline().strip() == "floor ready"
empty_ids = set(progs())
ttp = subprocess.Popen([TTP, "attach", "--all", "--irq-time", "--duration", "600s", "--quiet"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(8)
ttp_ids = set(progs()) - empty_ids
rows = []
for r in range(int(ROUNDS)):
    load = open("/proc/loadavg").read().split()[0]
    b = progs()
    t = time.time()
    w1 = subprocess.Popen(["taskset", "-c", "1", "python3", "-c", SENDER])
    w2 = subprocess.Popen(["dd", f"if={FILE}", "of=/dev/null", "bs=4k", "iflag=direct", "count=20000"],
                          stderr=subprocess.DEVNULL)
    w1.wait(); w2.wait()
    a = progs()
    for pid in sorted(a):
        if pid not in b or (pid not in ttp_ids and pid not in empty_ids):
            continue
        dn = a[pid].get("run_cnt", 0) - b[pid].get("run_cnt", 0)
        dt = a[pid].get("run_time_ns", 0) - b[pid].get("run_time_ns", 0)
        rows.append(dict(round=r + 1, utc=time.strftime("%H:%M:%S", time.gmtime(t)), load=load,
                         program=a[pid]["name"], kind="ttp" if pid in ttp_ids else "empty",
                         runs=dn, ns=dt / dn if dn else None))
ttp.terminate(); ttp.wait(); floor.terminate(); floor.wait()
json.dump(rows, open(OUT, "w"), indent=1)
for row in rows:
    print(row)
