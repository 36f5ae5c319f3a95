#!/usr/bin/env python3
# Cost a statement of each `stmt_*` program of `statements` (sums) at
# pgbench -S -c 4 -j 2, by the kernel's BPF statistics, for one or more
# ttp-ebpf binaries in turn (rounds interleaved): Δrun_time_ns and
# Δrun_cnt of the programs that instance loaded between two reads 1 s and
# 6 s into pgbench's run, over the statements the server counted between
# the same reads (pg_stat_database's xact_commit, less the read's own).
# Usage: statements-per-program.py PGDATA SOCKET_DIR PORT ROUNDS BIN[,BIN...]
#   (as root; a server with compute_query_id = on and pgbench's tables,
#   user ttp; PostgreSQL's programs from PGBIN or
#   /usr/lib/postgresql/15/bin). docs/benchmarks.md, "Start-up cut again".
import json, subprocess, sys, time, os
DATA, HOST, PORT = sys.argv[1], sys.argv[2], sys.argv[3]
rounds, bins = int(sys.argv[4]), sys.argv[5].split(",")
PG = os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin")
pm = open(os.path.join(DATA, "postmaster.pid")).readline().strip()
def progs():
    return {p["id"]: p for p in json.loads(subprocess.check_output(["bpftool", "-j", "prog", "show"]))}
def commits():
    out = subprocess.check_output([f"{PG}/psql", "-X", "-A", "-t", "-h", HOST, "-p", PORT, "-U", "ttp", "postgres",
        "-c", "select xact_commit from pg_stat_database where datname = 'postgres'"])
    return int(out.strip())
prior = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
subprocess.check_call(["sysctl", "-qw", "kernel.bpf_stats_enabled=1"])
for r in range(rounds):
    for b in bins:
        before = set(progs())
        ttp = subprocess.Popen([b, "statements", "--pid", pm, "--duration", "10s", "--top", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        while "measuring" not in ttp.stderr.readline():
            pass
        bench = subprocess.Popen([f"{PG}/pgbench", "-n", "-S", "-c", "4", "-j", "2", "-T", "7", "-h", HOST, "-p", PORT,
            "-U", "ttp", "postgres"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
        def snap():
            return {p["name"]: (p.get("run_time_ns", 0), p.get("run_cnt", 0)) for i, p in progs().items()
                if i not in before and p.get("name", "").startswith("stmt_")}
        a, a_c = snap(), commits()
        time.sleep(5)
        z, z_c = snap(), commits()
        n = max(1, z_c - a_c - 1)
        ttp.wait(); bench.wait()
        parts, total = [], 0
        for name in sorted(z):
            dt, dc = z[name][0] - a[name][0], z[name][1] - a[name][1]
            total += dt
            if dc:
                parts.append(f"{name} {dt / n:.0f} ns a statement, {dc / n:.2f} runs, {dt / dc:.0f} ns a run")
        print(f"round {r} {b}: {n} statements; programs {total / n:.0f} ns a statement; " + "; ".join(parts), flush=True)
subprocess.call(["sysctl", "-qw", f"kernel.bpf_stats_enabled={prior}"])
