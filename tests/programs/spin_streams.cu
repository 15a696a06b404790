/* spin_streams — a kernel that waits for the host on one stream while
 * another stream's kernel writes an mmap'ed file and the host waits for
 * only that second stream:
 *   stream a: `spin` loops until a managed-memory flag is set, then writes
 *             a marker into the mapped file;
 *   stream b: `work` writes other bytes of the same file;
 *   the host waits for b alone (cudaStreamSynchronize, cudaEventRecord +
 *   cudaEventSynchronize, or polling cudaStreamQuery): that must return
 *   while `spin` still runs, and the CPU must then see work's bytes
 *   (mapping and pread()); then the host sets the flag (spin acknowledges
 *   it in the flag), synchronizes a, and must see the marker too.
 * Stream a is created with cudaStreamNonBlocking, then with
 * cudaStreamCreate (b always with cudaStreamCreate). Each variant uses a
 * fresh file.
 *
 * `spin_streams shared` (run with GAIA_RUNNING_KERNELS=shared) has the CPU
 * write the mapping while spin runs, then launch `echo` on b, which copies
 * what the CPU wrote to another part of the file: the launch must neither
 * wait for spin (it would wait for ever) nor hide the CPU's bytes from
 * echo, and it must keep what work wrote.
 *
 * `spin_streams isolated` (the default GAIA_RUNNING_KERNELS) does the same
 * once with a spin that gives up after ISOLATED_SPIN_S: echo's launch must
 * wait for it (spin sees the bytes as at its own launch), say on stderr
 * after 5 s what it waits for and which setting lets it go on, and then
 * show echo the CPU's bytes; and the same wait when another process, not
 * the CPU of this one, changed the file (external_change).

 */
#include <sys/wait.h>

#include "programs.h"

#define NB (8 * PAGE)
#define MARK_BYTES 64
#define WORK_FROM MARK_BYTES	/* work writes [WORK_FROM, WORK_TO): same first page */
#define WORK_TO (4 * PAGE)
#define CPU_FROM (4 * PAGE)	/* the CPU writes [CPU_FROM, CPU_TO) while spin runs */
#define CPU_TO (6 * PAGE)
#define ECHO_TO (6 * PAGE)	/* echo copies them to [ECHO_TO, ECHO_TO + CPU_TO - CPU_FROM) */
/* spin's early store (shared mode), in a page the CPU writes after it: the
 * device's byte wins over the CPU's concurrent one, and the rebase before
 * echo must keep it there. */
#define EARLY_AT (CPU_FROM + PAGE + 100)

/* With `early`, spin first stores EARLY there and sets the flag to 3: the
 * host then knows the store was made before it writes the same page. */
#define EARLY 0x77
__global__ void spin(volatile int *flag, unsigned char *mark, long long give_up_ns, unsigned char *early)
{
	if (blockIdx.x != 0 || threadIdx.x != 0)
		return;
	if (early) {
		*early = EARLY;
		__threadfence_system();
		*flag = 3;
	}
	long long t0 = device_ns();
	while (*flag != 1)
		if (device_ns() - t0 > give_up_ns)
			return;		/* no marker: the host sees it missing */
	for (int i = 0; i < MARK_BYTES; i++)
		mark[i] = (unsigned char)(0xa0 + i);
	*flag = 2;	/* seen, marker written */
}
SIMGPU_KERNEL(spin);

__global__ void work(unsigned char *m, unsigned long long from, unsigned long long to)
{
	unsigned long long i = from + (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < to; i += (unsigned long long)gridDim.x * blockDim.x)
		m[i] = (unsigned char)(i * 7 + 3);
}
SIMGPU_KERNEL(work);

__global__ void echo(unsigned char *m, unsigned long long from, unsigned long long to, unsigned long long dst)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; from + i < to; i += (unsigned long long)gridDim.x * blockDim.x)
		m[dst + i] = (unsigned char)(m[from + i] ^ 0x5a);
}
SIMGPU_KERNEL(echo);

static unsigned char cpu_byte(size_t i)
{
	return (unsigned char)(i * 13 + 1);
}

static unsigned char initial(size_t i)
{
	return (unsigned char)(i % 251);
}

enum wait_kind { WAIT_STREAM, WAIT_EVENT, WAIT_QUERY };
static const char *const wait_name[] = { "cudaStreamSynchronize(b)", "cudaEventSynchronize(event on b)",
					 "cudaStreamQuery(b) polling" };

/* The file must show work's bytes, and the marker iff `marked`; with
 * `cpu_wrote`, the CPU's bytes and echo's copy of them (2: with spin's
 * early byte in place of the CPU's there). */
static void check_file(const char *when, int fd, const unsigned char *m, int marked, int cpu_wrote)
{
	unsigned char *buf = (unsigned char *)malloc(NB);
	pread_all(fd, buf, NB, 0);
	for (size_t i = 0; i < NB; i++) {
		unsigned char want = initial(i);
		if (i < MARK_BYTES && marked)
			want = (unsigned char)(0xa0 + i);
		else if (i >= WORK_FROM && i < WORK_TO)
			want = (unsigned char)(i * 7 + 3);
		else if (cpu_wrote && i >= CPU_FROM && i < CPU_TO)
			want = i == EARLY_AT && cpu_wrote == 2 ? EARLY : cpu_byte(i);
		else if (cpu_wrote && i >= ECHO_TO && i < ECHO_TO + (CPU_TO - CPU_FROM))
			want = (unsigned char)((i - ECHO_TO + CPU_FROM == EARLY_AT && cpu_wrote == 2
						? EARLY : cpu_byte(i - ECHO_TO + CPU_FROM)) ^ 0x5a);
		const char *what = i < MARK_BYTES ? " (marker)" : i < WORK_TO ? " (work's bytes)"
				 : !cpu_wrote ? " (untouched)"
				 : i == EARLY_AT && cpu_wrote == 2 ? " (spin's early store, over the CPU's)"
				 : i < CPU_TO ? " (the CPU's bytes)" : " (echo's copy)";
		CHECK(m[i] == want, "%s: byte %zu through the mapping is %#x, want %#x%s", when, i, m[i], want, what);
		CHECK(buf[i] == want, "%s: byte %zu read with pread() is %#x, want %#x%s", when, i, buf[i], want, what);
	}
	free(buf);
}

static void variant(volatile int *flag, int a_nonblocking, enum wait_kind how, int cpu_writes)
{
	static char where[400];
	char when[300];
	snprintf(when, sizeof(when), "stream a %s, %s%s", a_nonblocking ? "cudaStreamNonBlocking" : "cudaStreamCreate",
		 wait_name[how], cpu_writes ? ", the CPU writing the mapping and launching echo on b while spin runs" : "");
	watchdog(20);	/* per variant; spin itself gives up later than this */
	int fd = make_file(NB, initial);
	unsigned char *m = (unsigned char *)map_file(fd, NB);
	cudaStream_t a, b;
	if (a_nonblocking)
		CUDA_OK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
	else
		CUDA_OK(cudaStreamCreate(&a));
	CUDA_OK(cudaStreamCreate(&b));

	snprintf(where, sizeof(where), "%s: launching spin on a and work on b", when);
	step = where;
	SIMGPU_LAUNCH(spin, 1, 1, 0, a)(flag, m, 50ll * 1000 * 1000 * 1000, cpu_writes ? m + EARLY_AT : (unsigned char *)0);
	CUDA_OK(cudaGetLastError());
	if (cpu_writes) {
		snprintf(where, sizeof(where), "%s: waiting for spin's early store", when);
		while (*flag != 3)
			usleep(100);
	}
	SIMGPU_LAUNCH(work, 8, 128, 0, b)(m, (unsigned long long)WORK_FROM, (unsigned long long)WORK_TO);
	CUDA_OK(cudaGetLastError());
	if (cpu_writes) {
		for (size_t i = CPU_FROM; i < CPU_TO; i++)
			m[i] = cpu_byte(i);
		snprintf(where, sizeof(where), "%s: launching echo on b while spin runs on a", when);
		SIMGPU_LAUNCH(echo, 8, 128, 0, b)(m, (unsigned long long)CPU_FROM, (unsigned long long)CPU_TO,
						   (unsigned long long)ECHO_TO);
		CUDA_OK(cudaGetLastError());
	}

	snprintf(where, sizeof(where), "%s: waiting for b while spin runs on a", when);
	if (how == WAIT_STREAM) {
		CUDA_OK(cudaStreamSynchronize(b));
	} else if (how == WAIT_EVENT) {
		cudaEvent_t ev;
		CUDA_OK(cudaEventCreate(&ev));
		CUDA_OK(cudaEventRecord(ev, b));
		CUDA_OK(cudaEventSynchronize(ev));
		CUDA_OK(cudaEventDestroy(ev));
	} else {
		cudaError_t e;
		while ((e = cudaStreamQuery(b)) == cudaErrorNotReady)
			usleep(1000);
		CHECK(e == cudaSuccess, "%s: cudaStreamQuery(b) returned %s", when, cudaGetErrorName(e));
	}
	char msg[400];
	snprintf(msg, sizeof(msg), "%s, spin still waiting", when);
	check_file(msg, fd, m, 0, cpu_writes ? 2 : 0);

	snprintf(where, sizeof(where), "%s: cudaStreamSynchronize(a) after setting the flag", when);
	*flag = 1;
	CUDA_OK(cudaStreamSynchronize(a));
	CHECK(*flag == 2, "%s: spin never saw the flag (gave up after 50 s)", when);
	snprintf(msg, sizeof(msg), "%s, then flag set and cudaStreamSynchronize(a)", when);
	check_file(msg, fd, m, 1, cpu_writes ? 2 : 0);
	*flag = 0;

	CUDA_OK(cudaStreamDestroy(a));
	CUDA_OK(cudaStreamDestroy(b));
	munmap(m, NB);
	close(fd);
}

/* A fresh file, mapped, and streams a (non-blocking) and b. */
static unsigned char *file_and_streams(int *fd, cudaStream_t *a, cudaStream_t *b)
{
	*fd = make_file(NB, initial);
	unsigned char *m = (unsigned char *)map_file(*fd, NB);
	CUDA_OK(cudaStreamCreateWithFlags(a, cudaStreamNonBlocking));
	CUDA_OK(cudaStreamCreate(b));
	return m;
}

/* A file mapped while spin runs, written by the CPU and then by `work` on
 * b: its first copy on the device needs no wait for spin (which cannot
 * read it), so the launch must not hang. Managed backing only: a vmm
 * replica is made with cuMemSetAccess, which synchronizes the device
 * (cuda.h marks it \note_sync), so there the launch waits for spin. */
static void new_mapping_while_spinning(volatile int *flag)
{
	const char *backing = getenv("GAIA_BACKING");
	if (!backing || strcmp(backing, "managed")) {
		printf("(a file mapped while spin runs: managed backing only)\n");
		return;
	}
	watchdog(20);
	int fd;
	cudaStream_t a, b;
	unsigned char *m = file_and_streams(&fd, &a, &b);
	step = "new mapping: launching spin on a";
	SIMGPU_LAUNCH(spin, 1, 1, 0, a)(flag, m, 50ll * 1000 * 1000 * 1000, (unsigned char *)0);
	CUDA_OK(cudaGetLastError());
	int fd2 = make_file(NB, initial);
	unsigned char *m2 = (unsigned char *)map_file(fd2, NB);
	for (size_t i = CPU_FROM; i < CPU_TO; i++)
		m2[i] = cpu_byte(i);
	step = "new mapping: launching work and echo on b over a file mapped while spin runs";
	SIMGPU_LAUNCH(work, 8, 128, 0, b)(m2, (unsigned long long)WORK_FROM, (unsigned long long)WORK_TO);
	SIMGPU_LAUNCH(echo, 8, 128, 0, b)(m2, (unsigned long long)CPU_FROM, (unsigned long long)CPU_TO,
					   (unsigned long long)ECHO_TO);
	CUDA_OK(cudaGetLastError());
	step = "new mapping: cudaStreamSynchronize(b) while spin runs";
	CUDA_OK(cudaStreamSynchronize(b));
	check_file("a file mapped while spin runs, after b", fd2, m2, 0, 1);
	*flag = 1;
	CUDA_OK(cudaStreamSynchronize(a));
	CHECK(*flag == 2, "new mapping: spin never saw the flag");
	for (size_t i = 0; i < NB; i++) {
		unsigned char want = i < MARK_BYTES ? (unsigned char)(0xa0 + i) : initial(i);
		CHECK(m[i] == want, "new mapping: byte %zu of the file spin marks is %#x, want %#x", i, m[i], want);
	}
	*flag = 0;
	CUDA_OK(cudaStreamDestroy(a));
	CUDA_OK(cudaStreamDestroy(b));
	munmap(m2, NB);
	munmap(m, NB);
	close(fd2);
	close(fd);
}

/* Spins until the flag is 1 or give_up_ns passed, then reads m[at]. */
__global__ void watch(volatile int *flag, const unsigned char *m, unsigned long long at, unsigned char *seen,
		      long long give_up_ns)
{
	if (blockIdx.x != 0 || threadIdx.x != 0)
		return;
	long long t0 = device_ns();
	while (*flag != 1 && device_ns() - t0 <= give_up_ns)
		;
	*seen = m[at];
}
SIMGPU_KERNEL(watch);

#define WATCH_S 3
#define EXTERNAL_AT (5 * PAGE + 7)

/* GAIA_RUNNING_KERNELS=isolated: while `watch` runs, another process
 * writes a byte of the file with pwrite(); the next launch (work, on b)
 * must wait for watch, which then reads the byte as at its own launch;
 * after the syncs the mapping shows the other process's byte. */
static void external_change(volatile int *flag)
{
	watchdog(WATCH_S + 20);
	char path[256];
	int fd = make_file_with(NB, initial, path);
	unsigned char *m = (unsigned char *)map_file(fd, NB);
	unsigned char *seen;
	CUDA_OK(cudaMallocManaged((void **)&seen, 1, cudaMemAttachGlobal));
	*seen = 0;
	cudaStream_t a, b;
	CUDA_OK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
	CUDA_OK(cudaStreamCreate(&b));
	step = "external: launching watch on a";
	SIMGPU_LAUNCH(watch, 1, 1, 0, a)(flag, m, (unsigned long long)EXTERNAL_AT, seen,
					  (long long)WATCH_S * 1000 * 1000 * 1000);
	CUDA_OK(cudaGetLastError());
	step = "external: another process writes the file";
	pid_t child = fork();
	CHECK(child >= 0, "fork: %s", strerror(errno));
	if (child == 0) {
		int wfd = open(path, O_WRONLY);
		unsigned char v = 0x55;
		_exit(wfd >= 0 && pwrite(wfd, &v, 1, EXTERNAL_AT) == 1 ? 0 : 1);
	}
	int status = 0;
	CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the writing process failed (status %#x)", status);
	step = "external: launching work on b while watch runs (must wait for it)";
	SIMGPU_LAUNCH(work, 8, 128, 0, b)(m, (unsigned long long)WORK_FROM, (unsigned long long)WORK_TO);
	CUDA_OK(cudaGetLastError());
	step = "external: syncing a and b";
	CUDA_OK(cudaStreamSynchronize(b));
	CUDA_OK(cudaStreamSynchronize(a));
	CHECK(*seen == initial(EXTERNAL_AT), "watch, launched before another process wrote byte %d, read %#x, "
	      "want %#x (the byte as at its launch)", EXTERNAL_AT, *seen, initial(EXTERNAL_AT));
	CHECK(m[EXTERNAL_AT] == 0x55, "the mapping shows %#x at the byte another process wrote, want 0x55",
	      m[EXTERNAL_AT]);
	step = "external: a kernel launched after the syncs";
	*flag = 1;
	SIMGPU_LAUNCH(watch, 1, 1, 0, b)(flag, m, (unsigned long long)EXTERNAL_AT, seen, 0ll);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaStreamSynchronize(b));
	*flag = 0;
	CHECK(*seen == 0x55, "a kernel launched after the syncs read %#x at the byte another process wrote, "
	      "want 0x55", *seen);
	CUDA_OK(cudaFree(seen));
	CUDA_OK(cudaStreamDestroy(a));
	CUDA_OK(cudaStreamDestroy(b));
	munmap(m, NB);
	close(fd);
	unlink(path);
}

#define ISOLATED_SPIN_S 7

/* GAIA_RUNNING_KERNELS=isolated: echo's launch waits until spin gives up,
 * and the shim's note on stderr says what for and which setting lets it
 * go on. */
static void isolated(volatile int *flag, const char *log_path)
{
	const char *note = "has waited 5 s for the kernels launched earlier";
	const char *advice = "GAIA_RUNNING_KERNELS=shared lets it go on";
	watchdog(ISOLATED_SPIN_S + 20);
	int fd;
	cudaStream_t a, b;
	unsigned char *m = file_and_streams(&fd, &a, &b);
	step = "isolated: launching spin on a and work on b";
	SIMGPU_LAUNCH(spin, 1, 1, 0, a)(flag, m, (long long)ISOLATED_SPIN_S * 1000 * 1000 * 1000, (unsigned char *)0);
	SIMGPU_LAUNCH(work, 8, 128, 0, b)(m, (unsigned long long)WORK_FROM, (unsigned long long)WORK_TO);
	CUDA_OK(cudaGetLastError());
	for (size_t i = CPU_FROM; i < CPU_TO; i++)
		m[i] = cpu_byte(i);
	step = "isolated: launching echo on b while spin runs on a (it must wait for spin to give up)";
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	SIMGPU_LAUNCH(echo, 8, 128, 0, b)(m, (unsigned long long)CPU_FROM, (unsigned long long)CPU_TO,
					   (unsigned long long)ECHO_TO);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CUDA_OK(cudaGetLastError());
	double waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	CHECK(waited > ISOLATED_SPIN_S - 2, "echo's launch returned after %.2f s: it did not wait for spin "
	      "(gives up after %d s), which may still read the bytes the CPU changed", waited, ISOLATED_SPIN_S);
	step = "isolated: cudaStreamSynchronize(b), then (a)";
	CUDA_OK(cudaStreamSynchronize(b));
	CUDA_OK(cudaStreamSynchronize(a));
	CHECK(*flag == 0, "spin saw a flag nobody set");
	check_file("isolated, after both streams", fd, m, 0, 1);
	/* The shim said, while waiting, what for and how to let it go on. */
	fflush(stderr);
	FILE *log = fopen(log_path, "r");
	CHECK(log != NULL, "cannot read back stderr from %s", log_path);
	static char text[1 << 16];
	size_t n = fread(text, 1, sizeof(text) - 1, log);
	text[n] = 0;
	fclose(log);
	CHECK(strstr(text, note) && strstr(text, advice),
	      "no note on stderr about the launch's wait (\"%s\" ... \"%s\"); stderr was:\n%s", note, advice, text);
	CUDA_OK(cudaStreamDestroy(a));
	CUDA_OK(cudaStreamDestroy(b));
	munmap(m, NB);
	close(fd);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	char log_path[] = "/tmp/spin_streams_stderr_XXXXXX";
	if (!strcmp(mode, "shared")) {
		const char *knob = getenv("GAIA_RUNNING_KERNELS");
		CHECK(knob && !strcmp(knob, "shared"), "spin_streams shared needs GAIA_RUNNING_KERNELS=shared");
	} else if (!strcmp(mode, "isolated")) {
		/* stderr goes to a file too, to find the shim's note in it. */
		int log = mkstemp(log_path);
		CHECK(log >= 0, "mkstemp: %s", strerror(errno));
		CHECK(dup2(log, 2) == 2, "dup2: %s", strerror(errno));
		close(log);
	} else {
		CHECK(!*mode, "usage: spin_streams [shared|isolated]");
	}
	CUDA_OK(cudaSetDevice(0));
	int *flag;
	CUDA_OK(cudaMallocManaged((void **)&flag, sizeof(int), cudaMemAttachGlobal));
	/* Both kernels loaded before either waits on the other: under CUDA's
	 * lazy loading (the default since CUDA 12.2) a kernel first launched
	 * while another one runs waits for the device, so without this the
	 * program hangs on a real GPU with or without the shim. */
	unsigned char *scratch;
	CUDA_OK(cudaMalloc((void **)&scratch, MARK_BYTES));
	*flag = 1;
	SIMGPU_LAUNCH(spin, 1, 1, 0, 0)(flag, scratch, 0ll, (unsigned char *)0);
	SIMGPU_LAUNCH(work, 1, 1, 0, 0)(scratch, 0ull, 0ull);
	SIMGPU_LAUNCH(echo, 1, 1, 0, 0)(scratch, 0ull, 0ull, 0ull);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaFree(scratch));
	*flag = 0;
	if (!strcmp(mode, "isolated")) {
		isolated(flag, log_path);
		unlink(log_path);
		external_change(flag);

	} else {
		for (int nb = 1; nb >= 0; nb--)
			for (int how = WAIT_STREAM; how <= WAIT_QUERY; how++)
				variant(flag, nb, (enum wait_kind)how, !strcmp(mode, "shared"));
		new_mapping_while_spinning(flag);
	}
	CUDA_OK(cudaFree(flag));
	printf("ok spin_streams %s\n", mode);
	return 0;
}
