// Loads and attaches every program of a BPF object, prints "floor ready",
// and holds them until SIGINT or SIGTERM. With --stats it also holds a
// BPF_ENABLE_STATS fd, as ttp does to report its probes' own cost, so that
// the kernel's per-run statistics are on for every program meanwhile (the
// fd-based switch: nothing is left changed when the process ends); with
// --stats FILE it writes, at the end, one line per program to FILE:
// "NAME RUNS RUN_TIME_NS" (the kernel's run_cnt and run_time_ns).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s OBJECT [--stats [FILE]]\n", argv[0]);
		return 2;
	}
	const char *stats_out = argc > 3 ? argv[3] : NULL;
	if (argc > 2 && strcmp(argv[2], "--stats") == 0 &&
	    bpf_enable_stats(BPF_STATS_RUN_TIME) < 0) {
		perror("BPF_ENABLE_STATS");
		return 1;
	}
	struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "loading %s failed\n", argv[1]);
		return 1;
	}
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, obj) {
		if (!bpf_program__attach(prog)) {
			fprintf(stderr, "attaching %s failed\n", bpf_program__name(prog));
			return 1;
		}
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	printf("floor ready\n");
	fflush(stdout);
	while (!stop)
		pause();
	if (stats_out) {
		FILE *f = fopen(stats_out, "w");
		if (!f) {
			perror(stats_out);
			return 1;
		}
		bpf_object__for_each_program(prog, obj) {
			struct bpf_prog_info info;
			__u32 len = sizeof(info);
			memset(&info, 0, sizeof(info));
			if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) == 0)
				fprintf(f, "%s %llu %llu\n", bpf_program__name(prog),
					(unsigned long long)info.run_cnt,
					(unsigned long long)info.run_time_ns);
		}
		fclose(f);
	}
	bpf_object__close(obj);
	return 0;
}
