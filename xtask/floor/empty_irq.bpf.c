// The floor of `--irq-time` (ttp-ebpf/src/irq.rs): a tp_btf program that
// does nothing at each interrupt tracepoint it hooks. Built and loaded by
// hand as docs/ledger-cost.md ("Interrupt time, --irq-time") shows, with
// the loader of the other floors (loader.c).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define EMPTY(tp)                     \
	SEC("tp_btf/" #tp)            \
	int tp(void *ctx)             \
	{                             \
		return 0;             \
	}

EMPTY(irq_handler_entry)
EMPTY(irq_handler_exit)
EMPTY(softirq_entry)
EMPTY(softirq_exit)
EMPTY(local_timer_entry)
EMPTY(local_timer_exit)

char LICENSE[] SEC("license") = "GPL";
