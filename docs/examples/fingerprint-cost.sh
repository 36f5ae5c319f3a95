#!/bin/bash
# What the in-kernel statement fingerprint costs, by the kernel's BPF
# statistics (docs/benchmarks.md, "The fingerprint in the kernel: cost a
# byte"). Run as root from the repository, after `cargo build -p ttp-user`.
#
# A throw-away PostgreSQL cluster (PGBIN, default PostgreSQL 15 of the
# distribution), pgbench's tables at scale 1, three scripts of one SELECT
# whose text is 56, 493 and 976 bytes (the longer ones add predicates
# `AND abalance > -100001 …`: words, operators and constants, as real SQL
# has). For each round, each `compute_query_id` (off: the kernel
# fingerprints every statement; on: it keys by st_query_id and does not)
# and each script, `ttp statements` runs while `pgbench -n -M simple -c 2
# -T 5` does; the run time of stmt_sock_send (the program that ends a
# statement and sums it) is read with `bpftool -j prog show` before and
# after, for the programs ttp holds (their ids from /proc/PID/fdinfo), and
# divided by the statements ttp counted. Prints one line a run.
set -euo pipefail
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
TTP=${TTP:-$PWD/target/debug/ttp-ebpf}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-5947}
D=$(mktemp -d /tmp/ttp-fp-cost.XXXXXX)
chown postgres "$D"
as_pg() { su postgres -c "$*"; }
old=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() {
  sysctl -qw kernel.bpf_stats_enabled="$old"
  as_pg "$PGBIN/pg_ctl -D $D/data -m immediate stop" >/dev/null 2>&1 || true
  rm -rf "$D"
}
trap cleanup EXIT
as_pg "$PGBIN/initdb -D $D/data -A trust -U postgres" >/dev/null
as_pg "$PGBIN/pg_ctl -D $D/data -o '-p $PORT -k $D -c listen_addresses=' -l $D/log -w start" >/dev/null
as_pg "$PGBIN/pgbench -i -s 1 -q -h $D -p $PORT postgres" >/dev/null 2>&1
PM=$(head -1 "$D/data/postmaster.pid")
python3 - "$D" <<'PY'
import sys
d = sys.argv[1]
def script(target):
    s = "SELECT abalance FROM pgbench_accounts WHERE aid = :aid"
    k = 1
    while len(s) < target:
        s += " AND abalance > -%d" % (100000 + k)
        k += 1
    return "\\set aid random(1, 100000)\n" + s + ";\n"
for name, target in (("short", 0), ("mid", 480), ("long", 960)):
    open("%s/%s.sql" % (d, name), "w").write(script(target))
PY
chmod 644 "$D"/*.sql
sysctl -qw kernel.bpf_stats_enabled=1
psql() { as_pg "$PGBIN/psql -X -q -h $D -p $PORT -d postgres -c \"$1\""; }
prog() { # run_time_ns run_cnt of the stmt_sock_send that pid $1 holds
  ids=$(grep -h "^prog_id:" /proc/"$1"/fdinfo/* 2>/dev/null | awk '{print $2}' | sort -u | tr '\n' ' ')
  bpftool -j prog show | python3 -c "
import json, sys
ids = set(int(x) for x in '$ids'.split())
t = c = 0
for p in json.load(sys.stdin):
    if p.get('name', '').startswith('stmt_sock_send') and p['id'] in ids:
        t += p.get('run_time_ns', 0); c += p.get('run_cnt', 0)
print(t, c)"
}
echo "round compute_query_id script statements ns_a_statement runs"
for r in $(seq "$ROUNDS"); do
  for q in off on; do
    psql "ALTER SYSTEM SET compute_query_id = $q"
    psql "SELECT pg_reload_conf()" >/dev/null
    sleep 0.5
    for s in short mid long; do
      "$TTP" statements --pid "$PM" --duration 9s --json "$D/st.json" >/dev/null 2>"$D/ttp.err" &
      T=$!
      for _ in $(seq 100); do grep -q "measuring" "$D/ttp.err" && break; sleep 0.1; done
      read -r t0 c0 < <(prog $T)
      as_pg "$PGBIN/pgbench -n -M simple -c 2 -T 5 -f $D/$s.sql -h $D -p $PORT postgres" >/dev/null 2>&1
      read -r t1 c1 < <(prog $T)
      wait $T
      n=$(python3 -c "import json; print(json.load(open('$D/st.json'))['statements'])")
      echo "$r $q $s $n $(( (t1 - t0) / n )) $((c1 - c0))"
    done
  done
done
