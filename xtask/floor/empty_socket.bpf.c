// The floor of `statements` at the client socket, for `cargo xtask bench
// statements`: tp_btf programs (the same kind of attachment as ttp's) on
// the two tracepoints it hooks, that do nothing. What they cost is the
// tracepoints' dispatch and an empty run at every socket read and write of
// the machine, which any tool that takes a statement's boundaries there
// pays before its own work.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("tp_btf/sock_recv_length")
int empty_recv(void *ctx)
{
	return 0;
}

SEC("tp_btf/sock_send_length")
int empty_send(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
