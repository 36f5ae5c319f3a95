// The classic-tracepoint floor, for `cargo xtask bench overhead --floor`:
// an empty program of the older kind (BPF_PROG_TYPE_TRACEPOINT, attached
// through a perf event, the kind bpftrace's `tracepoint:` probes and most
// bcc tools load) at each tracepoint the default ledger hooks, beside the
// tp_btf floor of empty_ledger.bpf.c. The ledger's wall-clock goal on
// sched-pipe is set against it.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define EMPTY(name, category)                   \
	SEC("tracepoint/" #category "/" #name)  \
	int name(void *ctx)                     \
	{                                       \
		return 0;                       \
	}

EMPTY(sched_switch, sched)
EMPTY(sched_wakeup_new, sched)
EMPTY(sched_process_fork, sched)
EMPTY(sched_process_exec, sched)
EMPTY(cpu_idle, power)
EMPTY(block_bio_queue, block)
EMPTY(block_io_start, block)
EMPTY(block_rq_issue, block)
EMPTY(block_io_done, block)

char LICENSE[] SEC("license") = "GPL";
