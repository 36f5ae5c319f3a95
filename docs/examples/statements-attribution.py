#!/usr/bin/env python3
"""What each statements tool's own code costs a transaction, by attribution.

The side-by-side rounds of `cargo xtask bench statements` compare CPU per
transaction between two clusters and between rounds; on this 2-vCPU VM a
single ratio spreads by +-10-40 %, more than the tools cost. This script
charges each tool only the CPU its own code takes, from call chains:

- `perf record -a -g` (cpu-clock, 1999 Hz) over `pgbench -c 4 -j 2 -T 10`.
  A sample is a tool's when, walking from the leaf towards the root, a
  frame of that tool comes before a frame of the server's own work that
  the tool wraps (pg_stat_statements' hooks call the standard executor and
  utility functions):
  - pg_stat_statements: a frame in pg_stat_statements.so, or the executor
    instrumentation it turns on (Instr*, BufferUsageAccumDiff,
    WalUsageAccumDiff: `queryDesc->totaltime`);
  - ttp: a JITed BPF program (`bpf_prog_*`, with the helpers it calls), the
    tracepoint's dispatch (`bpf_trace_run*`, `__bpf_prog_enter/exit`), the
    uprobe trap, and the ttp-ebpf process itself;
  - the floor: the same BPF frames with empty programs at the socket
    tracepoints (target/floor, built by `cargo xtask bench statements`).
- The kernel's own BPF statistics (`kernel.bpf_stats_enabled`, restored
  after) for every program loaded during the run: runs and run time a
  transaction, a second reference for the BPF part that sampling does not
  give.

Usage (as root; docs/benchmarks.md, "By attribution"):
  statements-attribution.py SOCKDIR TTP_PORT PGSS_PORT [--tpcb] [--rounds N]
TTP_PORT's cluster runs with compute_query_id = on, PGSS_PORT's with
pg_stat_statements preloaded and its extension created; both initialised
with `pgbench -i -s 2`, user ttp. The binaries: ttp-ebpf from
target/release, the floor from target/floor, PostgreSQL's from PGBIN or
/usr/lib/postgresql/15/bin.
"""
import collections
import os
import re
import subprocess
import sys
import threading

import bpfprogs  # docs/examples/bpfprogs.py

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../..")
TTP = os.path.join(ROOT, "target/release/ttp-ebpf")
FLOOR = [os.path.join(ROOT, "target/floor/floor-loader"), os.path.join(ROOT, "target/floor/empty_socket.bpf.o")]
PG = os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin")
HZ = 1999

# The server's own work that a tool's hooks call into: a sample below one
# of these is the server's, whoever called it.
SERVER = ("standard_Executor", "standard_ProcessUtility", "standard_planner", "ExecutorRun", "ExecutorStart",
          "ExecutorFinish", "ExecutorEnd", "ProcessUtility", "PortalRun", "exec_simple_query", "PostgresMain")
INSTRUMENTATION = re.compile(r"\b(Instr[A-Z]\w*|BufferUsageAccumDiff|WalUsageAccumDiff)\b")


def classify(data):
    """Samples by process and by whose code they are in."""
    script = subprocess.run(["perf", "script", "-i", data, "-F", "comm,ip,sym,dso"],
                            capture_output=True, text=True, check=True).stdout
    procs, tags = collections.Counter(), collections.Counter()
    for block in script.split("\n\n"):
        lines = [line.strip() for line in block.strip().split("\n") if line.strip()]
        if not lines:
            continue
        comm = lines[0].split()[0]
        procs[comm if comm in ("postgres", "pgbench", "ttp-ebpf") else "other"] += 1
        tag = "ttp process" if comm == "ttp-ebpf" else None
        for f in lines[1:]:
            if tag:
                break
            if "pg_stat_statements.so" in f:
                tag = "pg_stat_statements"
            elif INSTRUMENTATION.search(f):
                tag = "pg_stat_statements' instrumentation"
            elif any(s in f for s in SERVER):
                break
            elif "bpf_prog_" in f:
                tag = "BPF programs"
            elif "uprobe" in f or "handle_swbp" in f or "exc_int3" in f:
                tag = "uprobe traps"
            elif "bpf_trace_run" in f or "__bpf_prog_enter" in f or "__bpf_prog_exit" in f or "bpf_tramp" in f:
                tag = "BPF dispatch"
        if tag:
            tags[tag] += 1
    return procs, tags


def pgbench(sock, port, tpcb, data):
    psql = [f"{PG}/psql", "-X", "-q", "-h", sock, "-p", port, "-U", "ttp", "postgres"]
    # What pgbench does before a run without -n, outside the measurement.
    subprocess.run(psql + ["-c", "vacuum pgbench_branches", "-c", "vacuum pgbench_tellers",
                           "-c", "truncate pgbench_history", "-c", "checkpoint"], check=True)
    before = bpfprogs.run_stats()
    out = subprocess.run(["perf", "record", "-q", "-a", "-g", "-F", str(HZ), "-o", data, "--", f"{PG}/pgbench", "-n"]
                         + ([] if tpcb else ["-S"]) + ["-c", "4", "-j", "2", "-T", "10", "-h", sock, "-p", port,
                                                       "-U", "ttp", "postgres"],
                         capture_output=True, text=True, check=True).stdout
    after = bpfprogs.run_stats()
    tx = int(re.search(r"actually processed: (\d+)", out).group(1))
    progs = {}
    for i, (name, ns, n) in after.items():
        if i in before:
            ns, n = ns - before[i][1], n - before[i][2]
        if n > 0:
            progs[name] = (progs.get(name, (0, 0))[0] + ns, progs.get(name, (0, 0))[1] + n)
    return tx, progs


def report(label, tx, progs, data):
    procs, tags = classify(data)
    work = procs["postgres"] + procs["pgbench"]
    print(f"{label}: {tx} transactions; server {procs['postgres'] / HZ / tx * 1e6:.1f} us and pgbench "
          f"{procs['pgbench'] / HZ / tx * 1e6:.1f} us a transaction (samples)")
    total = 0
    for tag, n in sorted(tags.items()):
        if tag in ("BPF programs", "BPF dispatch") and "pg_stat_statements" in label:
            continue  # the machine's other programs, not the tool's
        total += n
        print(f"  {tag:38s} {n / HZ / tx * 1e6:7.2f} us a transaction  {100 * n / work:5.2f} % of server + pgbench")
    print(f"  {'the tool, all of it':38s} {total / HZ / tx * 1e6:7.2f} us a transaction  {100 * total / work:5.2f} %")
    for name, (ns, n) in sorted(progs.items()):
        print(f"  BPF statistics: {name:24s} {n / tx:6.2f} runs a transaction, {ns / n:5.0f} ns a run, "
              f"{ns / tx / 1000:6.2f} us a transaction")


def postmaster_of(sock, port):
    """The postmaster's pid, from its data directory's postmaster.pid."""
    data = subprocess.run([f"{PG}/psql", "-X", "-A", "-t", "-h", sock, "-p", port, "-U", "ttp", "postgres", "-c",
                           "show data_directory"], capture_output=True, text=True, check=True).stdout.strip()
    return open(os.path.join(data, "postmaster.pid")).readline().strip()


def start(cmd, ready):
    """Starts a tool and waits for its line that says it is measuring; the
    rest of its output is drained (and dropped) so that it never blocks."""
    tool = subprocess.Popen(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    while ready not in tool.stdout.readline():
        if tool.poll() is not None:
            sys.exit(f"{cmd[0]} exited before it was ready")
    threading.Thread(target=tool.stdout.read, daemon=True).start()
    return tool


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        sys.exit(__doc__)
    tpcb = "--tpcb" in args
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 1
    sock, ttp_port, pgss_port = args[0], args[1], args[2]
    postmaster = postmaster_of(sock, ttp_port)
    prior = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=1"], check=True)
    try:
        for r in range(rounds):
            for variant in ("pg_stat_statements", "empty socket programs", "ttp statements"):
                data = f"/tmp/ttp-attribution-{r}-{variant.split()[0]}.data"
                if variant == "pg_stat_statements":
                    tx, progs = pgbench(sock, pgss_port, tpcb, data)
                else:
                    if variant.startswith("empty"):
                        tool = start(FLOOR, "floor ready")
                    else:
                        tool = start([TTP, "statements", "--pid", postmaster, "--duration", "60s", "--json",
                                      "/tmp/ttp-attribution.json"], "measuring")
                    tx, progs = pgbench(sock, ttp_port, tpcb, data)
                    tool.send_signal(2)
                    tool.wait()
                report(f"round {r + 1}, {variant}", tx, progs, data)
                os.remove(data)
    finally:
        subprocess.run(["sysctl", "-qw", f"kernel.bpf_stats_enabled={prior}"])


if __name__ == "__main__":
    main()
