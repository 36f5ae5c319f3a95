// The floor of any sched_switch hook, for `cargo xtask bench overhead
// --floor`: a tp_btf program (the same kind of attachment as the ledger's)
// that does nothing. What it costs is the tracepoint's dispatch and an
// empty run, which every tool hooking sched_switch pays before its own work.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("tp_btf/sched_switch")
int empty_switch(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
