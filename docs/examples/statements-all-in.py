#!/usr/bin/env python3
# All-in cost a statement of `statements` (sums) at pgbench -S -c 4 -j 2:
# programs (kernel BPF statistics, stmt_* programs this instance loaded)
# per statement between two reads, statements from pg_stat_database's
# xact_commit between the same reads; ttp's own CPU (/usr/bin/time, whole
# process: start-up, window and report) over the window's statements.
import json, subprocess, sys, time, os
# Usage: statements-all-in.py PGDATA SOCKET_DIR PORT [ROUNDS]
#   (as root; a server with compute_query_id = on and pgbench's tables,
#   user ttp; ttp-ebpf from target/release, PostgreSQL's programs from
#   PGBIN or /usr/lib/postgresql/15/bin). docs/benchmarks.md, "Summed in
#   the kernel".
DATA, HOST, PORT = sys.argv[1], sys.argv[2], sys.argv[3]
PG = os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin")
TTP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../target/release/ttp-ebpf")
pm = open(os.path.join(DATA, "postmaster.pid")).readline().strip()
def progs():
    return {p["id"]: p for p in json.loads(subprocess.check_output(["bpftool", "-j", "prog", "show"]))}
def commits():
    out = subprocess.check_output([f"{PG}/psql", "-X", "-A", "-t", "-h", HOST, "-p", PORT, "-U", "ttp", "postgres",
        "-c", "select xact_commit from pg_stat_database where datname = 'postgres'"])
    return int(out.strip())
prior = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
subprocess.check_call(["sysctl", "-qw", "kernel.bpf_stats_enabled=1"])
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
for r in range(rounds):
    before = set(progs())
    tout = f"/tmp/ttp-all-in-time-{r}"
    ttp = subprocess.Popen(["/usr/bin/time", "-f", "%U %S %M", "-o", tout, TTP, "statements", "--pid", pm,
        "--duration", "12s", "--top", "2", "--json", f"/tmp/ttp-all-in-{r}.json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while "measuring" not in ttp.stderr.readline():
        pass
    t0 = time.time()
    time.sleep(2)
    bench = subprocess.Popen([f"{PG}/pgbench", "-n", "-S", "-c", "4", "-j", "2", "-T", "12", "-h", HOST, "-p", PORT, "-U", "ttp", "postgres"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    def stmt_ns():
        return sum(p.get("run_time_ns", 0) for i, p in progs().items() if i not in before and p.get("name", "").startswith("stmt_"))
    a_ns, a_c = stmt_ns(), commits()
    time.sleep(5)
    b_ns, b_c = stmt_ns(), commits()
    ttp.wait(); bench.wait()
    u, s, m = open(tout).read().split()
    doc = json.load(open(f"/tmp/ttp-all-in-{r}.json"))
    n = doc["statements"]
    prog = (b_ns - a_ns) / max(1, (b_c - a_c - 1))
    own = (float(u) + float(s)) * 1e9 / n
    print(f"round {r}: {n} statements in the window; programs {prog:.0f} ns a statement ({b_c - a_c - 1} statements between the reads); ttp {own:.0f} ns a statement ({u} s user + {s} s sys, max RSS {int(m)/1024:.1f} MiB); all-in {prog + own:.0f} ns")
subprocess.call(["sysctl", "-qw", f"kernel.bpf_stats_enabled={prior}"])
