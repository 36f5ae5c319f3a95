// The floor of the ledger, for `cargo xtask bench overhead --floor`: a
// tp_btf program (the same kind of attachment as the ledger's) that does
// nothing, at each tracepoint the default ledger hooks
// (ttp-user/src/probe/mod.rs, LEDGER_PROGRAMS). What they cost is each
// tracepoint's dispatch and an empty run, which any tool hooking the same
// events pays before its own work.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define EMPTY(tp)                     \
	SEC("tp_btf/" #tp)            \
	int tp(void *ctx)             \
	{                             \
		return 0;             \
	}

EMPTY(sched_switch)
EMPTY(sched_wakeup_new)
EMPTY(sched_process_fork)
EMPTY(sched_process_exec)
EMPTY(cpu_idle)
EMPTY(block_bio_queue)
EMPTY(block_io_start)
EMPTY(block_rq_issue)
EMPTY(block_io_done)

char LICENSE[] SEC("license") = "GPL";
