/* kill -9 of a multi-threaded writer while another process keeps using
 * the file (DESIGN §1 promise 5, and "Processes": a device replica learns
 * what other processes changed at its next acquire).
 *
 * One long-lived consumer process under the shim maps the file, holds a
 * device replica of it and launches a kernel that reads all of it every
 * few milliseconds, for the whole run. Each trial starts a writer under
 * the shim with three threads, each owning a third of the file's pages and
 * running a seeded sequence of steps; after each completed step a thread
 * appends (thread, step) to a log with one O_APPEND write():
 *   store+msync   memset through the MAP_SHARED mapping, msync(MS_SYNC)
 *   store         memset through the mapping, nothing else
 *   pwrite        pwrite of a buffer
 *   write         lseek + write through the thread's own descriptor
 *   kernel+msync  a kernel on the thread's own stream fills the range
 *                 through the mapping, cudaStreamSynchronize, msync
 *   kernel        the same without msync (after the sync the result is in
 *                 the page cache: the kernel keeps it like a store)
 * The checker kills the writer with SIGKILL after a random delay and then:
 *   - regenerates every thread's completed steps from the seed and checks
 *     each byte of the file (pread): the value of the last completed step
 *     that wrote it, or what the file held before the trial, or (only in
 *     the range of a thread's step in flight) the new value. A byte of a
 *     completed msync'ed, written or synced step that is missing is lost
 *     data; one of a plain store that is missing is what the kernel would
 *     have kept and the shim did not. Both fail the test, and are counted.
 *   - asks the consumer to launch once more: its kernel's view of the file
 *     must equal pread's on every page whose changes the writer released
 *     (msync, pwrite, write, a sync) before the kill. Pages with plain
 *     stores of the writer, or with a step in flight at the kill, hold
 *     bytes it never published; release consistency promises them to
 *     other processes only once the file changes again (the next trial
 *     checks that): their stale bytes are counted, not failed.
 *   - checks no process of the writer is left (the checker is a child
 *     subreaper: the writer's simulated device process, orphaned, comes to
 *     it and must be dead and reaped within 2 s), and at the end that no
 *     /dev/shm object of this file's version table is left once the
 *     consumer has stopped.
 *
 *   survivor [TRIALS]     (CRASH_TRIALS; CRASH_SEED replays, CRASH_FIRST=i from trial i)
 *   survivor writer FILE LOG SEED           (run by the checker)
 *   survivor consumer FILE CMD_FD REPLY_FD  (run by the checker)
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "simgpu_kernel.h"

#include "../common/harness.h"

#define PAGE 4096
#define PAGES 48
#define THREADS 3
#define THREAD_PAGES (PAGES / THREADS)
#define BYTES ((size_t)PAGES * PAGE)
#define MAX_STEPS 200000
#define DEFAULT_TRIALS 200
#define MAX_DELAY_US 40000

__global__ void fill(unsigned char *p, unsigned long long n, unsigned char v)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		p[i] = v;
}
SIMGPU_KERNEL(fill);

__global__ void snapshot(const unsigned char *from, unsigned char *to, unsigned long long n)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		to[i] = from[i];
}
SIMGPU_KERNEL(snapshot);

enum kind { STORE_MSYNC, STORE, PWRITE, WRITE, KERNEL_MSYNC, KERNEL, KINDS };
static const char *const kind_name[KINDS] = {"store+msync", "store", "pwrite", "write", "kernel+msync",
					     "kernel"};

struct step {
	enum kind kind;
	unsigned page, npages;
	unsigned char value;
};

/* Step n (from 1) of thread t of the writer seeded `seed`; the checker
 * calls it too. Thread 1 runs the kernels, the others the CPU steps. */
static struct step step_of(uint64_t seed, unsigned t, unsigned n)
{
	uint64_t r = mix(seed ^ mix((uint64_t)t << 32 | n));
	struct step s;
	unsigned k = (unsigned)(r % 100);
	if (t == 1)
		s.kind = k < 45 ? KERNEL_MSYNC : k < 90 ? KERNEL : STORE;
	else
		s.kind = k < 30 ? STORE_MSYNC : k < 55 ? STORE : k < 80 ? PWRITE : WRITE;
	s.npages = 1 + (unsigned)((r >> 8) % 3);
	s.page = t * THREAD_PAGES + (unsigned)((r >> 16) % (THREAD_PAGES - s.npages + 1));
	/* Never 0 and never the previous trial's value of the same step. */
	s.value = (unsigned char)(1 + (n + (unsigned)(seed >> 40)) % 251);
	return s;
}

/* --- the writer --- */

struct writer_ctx {
	int fd, lfd;
	unsigned char *map;
	uint64_t seed;
	const char *file;
};

static void *writer_thread(void *p)
{
	struct writer_ctx *w = (struct writer_ctx *)p;
	static pthread_mutex_t order = PTHREAD_MUTEX_INITIALIZER;
	static unsigned next_id;
	pthread_mutex_lock(&order);
	unsigned t = next_id++;
	pthread_mutex_unlock(&order);
	unsigned char *buf = (unsigned char *)malloc(3 * PAGE);
	int own = open(w->file, O_RDWR);
	cudaStream_t stream = 0;
	if (!buf || own < 0 || (t == 1 && cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess))
		_exit(3);
	for (unsigned n = 1; n <= MAX_STEPS; n++) {
		struct step s = step_of(w->seed, t, n);
		unsigned char *at = w->map + (size_t)s.page * PAGE;
		size_t len = (size_t)s.npages * PAGE;
		off_t off = (off_t)s.page * PAGE;
		switch (s.kind) {
		case STORE_MSYNC:
			memset(at, s.value, len);
			if (msync(at, len, MS_SYNC))
				_exit(3);
			break;
		case STORE:
			memset(at, s.value, len);
			break;
		case PWRITE:
			memset(buf, s.value, len);
			if (pwrite(w->fd, buf, len, off) != (ssize_t)len)
				_exit(3);
			break;
		case WRITE:
			memset(buf, s.value, len);
			if (lseek(own, off, SEEK_SET) != off || write(own, buf, len) != (ssize_t)len)
				_exit(3);
			break;
		case KERNEL_MSYNC:
		case KERNEL:
			SIMGPU_LAUNCH(fill, 4, 128, 0, stream)(at, (unsigned long long)len, s.value);
			if (cudaStreamSynchronize(stream) != cudaSuccess)
				_exit(3);
			if (s.kind == KERNEL_MSYNC && msync(at, len, MS_SYNC))
				_exit(3);
			break;
		default:
			_exit(3);
		}
		uint32_t rec = t << 24 | n;
		if (write(w->lfd, &rec, sizeof(rec)) != sizeof(rec))
			_exit(3);
	}
	return NULL;
}

static int writer(const char *file, const char *log, uint64_t seed)
{
	struct writer_ctx w;
	w.fd = open(file, O_RDWR);
	w.lfd = open(log, O_WRONLY | O_APPEND);
	w.map = (unsigned char *)mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, w.fd, 0);
	w.seed = seed;
	w.file = file;
	if (w.fd < 0 || w.lfd < 0 || w.map == MAP_FAILED || cudaSetDevice(0) != cudaSuccess) {
		perror("survivor writer: setup");
		return 3;
	}
	uint32_t ready = 0xffffffffu; /* set up: steps start */
	if (write(w.lfd, &ready, sizeof(ready)) != sizeof(ready))
		return 3;
	pthread_t th[THREADS];
	for (int i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, writer_thread, &w);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	return 0;
}

/* --- the consumer: a device replica of the file, for the whole run --- */

static int consumer(const char *file, int cmd, int reply)
{
	int fd = open(file, O_RDWR);
	unsigned char *m = (unsigned char *)mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	unsigned char *dev = NULL;
	static unsigned char seen[BYTES], file_now[BYTES];
	if (fd < 0 || m == MAP_FAILED || cudaSetDevice(0) != cudaSuccess || cudaMalloc((void **)&dev, BYTES))
		return 3;
	unsigned long launches = 0;
	for (;;) {
		struct pollfd pf = {cmd, POLLIN, 0};
		int ready = poll(&pf, 1, 2);
		char c = 0;
		if (ready > 0 && read(cmd, &c, 1) != 1)
			c = 'q'; /* the checker is gone */
		if (c == 'q')
			break;
		SIMGPU_LAUNCH(snapshot, 8, 128, 0, 0)(m, dev, (unsigned long long)BYTES);
		if (cudaDeviceSynchronize() != cudaSuccess)
			return 3;
		launches++;
		if (c != 'c')
			continue;
		/* The kernel above launched after the writer was reaped. */
		if (cudaMemcpy(seen, dev, BYTES, cudaMemcpyDeviceToHost) != cudaSuccess ||
		    pread(fd, file_now, BYTES, 0) != (ssize_t)BYTES)
			return 3;
		uint32_t out[PAGES] = {0}; /* differing bytes per page */
		for (size_t i = 0; i < BYTES; i++)
			out[i / PAGE] += seen[i] != file_now[i];
		if (write(reply, out, sizeof(out)) != sizeof(out))
			return 3;
	}
	printf("survivor: consumer: %lu launches\n", launches);
	return 0;
}

/* --- the checker --- */

struct totals {
	unsigned long trials, startup_kills, steps, in_flight[KINDS], bytes_checked;
	unsigned long lost_synced, lost_unsynced, unsynced_bytes, device_stale, device_unpublished, leftover;
};

/* Children of this process other than `keep` still alive (not zombies);
 * zombies are reaped on the way. Orphans of the writer land here. */
static int stray_children(pid_t keep)
{
	char path[64];
	int alive = 0;
	DIR *d = opendir("/proc");
	for (struct dirent *e; d && (e = readdir(d));) {
		pid_t pid = (pid_t)atoi(e->d_name);
		if (pid <= 0 || pid == keep)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		FILE *f = fopen(path, "r");
		char state = 0;
		int ppid = 0;
		/* comm may hold spaces: parse after the last ')' */
		char line[512];
		if (f && fgets(line, sizeof(line), f)) {
			char *rp = strrchr(line, ')');
			if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) != 2)
				ppid = 0;
		}
		if (f)
			fclose(f);
		if (ppid != getpid())
			continue;
		if (state == 'Z')
			waitpid(pid, NULL, __WALL | WNOHANG);
		else
			alive++;
	}
	if (d)
		closedir(d);
	return alive;
}

static unsigned long current_trial;

/* What the last trial's check left: the file's times, and the pages the
 * survivor still saw stale because the writer never published them. */
static struct stat times_at_last_check;
static bool stale_unpublished[PAGES];

static bool same_times(const struct stat *a, const struct stat *b)
{
	return a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static int trial(const char *self, const char *file, const char *log, uint64_t seed, long delay_us, pid_t cons,
		 int cmd, int reply, struct totals *t)
{
	static unsigned char want[BYTES], got[BYTES], alt[BYTES];
	static signed char source[BYTES]; /* kind of the step that wrote each byte, -1 none */
	static bool either[BYTES];
	int fd = open(file, O_RDONLY), lfd = open(log, O_RDWR | O_TRUNC);
	if (fd < 0 || lfd < 0 || pread(fd, want, BYTES, 0) != (ssize_t)BYTES) {
		perror("survivor: trial set-up");
		return -1;
	}
	close(lfd);
	char seed_arg[32];
	snprintf(seed_arg, sizeof(seed_arg), "%" PRIu64, seed);
	char *writer[] = {(char *)self, (char *)"writer", (char *)file, (char *)log, seed_arg, NULL};
	int status = run_and_kill(writer, delay_us);
	if (status == -1 || !WIFSIGNALED(status)) {
		printf("survivor: FAIL: trial %lu: the writer exited (status %d) before the kill\n", current_trial,
		       status);
		return -1;
	}

	/* Nothing of the writer left (its device process, orphaned, comes
	 * to us), and so nothing that could still change the file. */
	unsigned long lost = 0;
	int alive = 0;
	for (int w = 0; w < 200 && (alive = stray_children(cons)); w++)
		sleep_us(10000);
	if (alive) {
		printf("survivor: FAIL: trial %lu: %d processes of the writer still alive 2 s after the kill\n",
		       current_trial, alive);
		t->leftover += (unsigned long)alive;
		lost++;
	}

	/* What completed, per thread. */
	static uint32_t rec[MAX_STEPS];
	lfd = open(log, O_RDONLY);
	ssize_t n = read(lfd, rec, sizeof(rec));
	close(lfd);
	size_t nrec = n > 0 ? (size_t)n / sizeof(uint32_t) : 0;
	unsigned done[THREADS] = {0};
	for (size_t i = 1; i < nrec; i++) {
		unsigned th = rec[i] >> 24, step = rec[i] & 0xffffff;
		if (th >= THREADS || step != done[th] + 1) {
			printf("survivor: FAIL: trial %lu: log record %zu is %#x\n", current_trial, i, rec[i]);
			return -1;
		}
		done[th] = step;
	}
	memset(source, -1, sizeof(source));
	memset(either, 0, sizeof(either));
	for (unsigned th = 0; th < THREADS; th++) {
		for (unsigned k = 1; k <= done[th]; k++) {
			struct step s = step_of(seed, th, k);
			memset(want + (size_t)s.page * PAGE, s.value, (size_t)s.npages * PAGE);
			memset(source + (size_t)s.page * PAGE, (int)s.kind, (size_t)s.npages * PAGE);
		}
		if (nrec) { /* the step in flight: old or new, byte by byte */
			struct step s = step_of(seed, th, done[th] + 1);
			memset(either + (size_t)s.page * PAGE, 1, (size_t)s.npages * PAGE);
			memset(alt + (size_t)s.page * PAGE, s.value, (size_t)s.npages * PAGE);
			t->in_flight[s.kind]++;
		}
		t->steps += done[th];
	}
	if (!nrec)
		t->startup_kills++;
	if (pread(fd, got, BYTES, 0) != (ssize_t)BYTES) {
		perror("survivor: pread");
		return -1;
	}
	struct stat now;
	bool file_unchanged = fstat(fd, &now) == 0 && same_times(&now, &times_at_last_check);
	times_at_last_check = now;
	close(fd);
	for (size_t i = 0; i < BYTES; i++) {
		if (source[i] == STORE)
			t->unsynced_bytes++;
		if (got[i] == want[i] || (either[i] && got[i] == alt[i]))
			continue;
		if (!lost)
			printf("survivor: FAIL: trial %lu: byte %zu is %u, want %u (written by a %s step), after "
			       "steps %u/%u/%u\n", current_trial, i, got[i], want[i],
			       source[i] >= 0 ? kind_name[source[i]] : "no", done[0], done[1], done[2]);
		if (!lost) /* the steps of the page's thread that wrote it */
			for (unsigned th = 0; th < THREADS; th++)
				for (unsigned k = 1; k <= done[th] + 1; k++) {
					struct step s = step_of(seed, th, k);
					if (i / PAGE >= s.page && i / PAGE < s.page + s.npages)
						printf("survivor:   thread %u step %u%s: %s of pages %u-%u, value %u\n",
						       th, k, k > done[th] ? " (in flight)" : "", kind_name[s.kind],
						       s.page, s.page + s.npages - 1, s.value);
				}
		lost++;
		if (source[i] == STORE)
			t->lost_unsynced++;
		else
			t->lost_synced++;
	}

	/* The survivor's next launch sees the file: every page the writer
	 * released (msync, pwrite, write, a sync) or did not touch. A page
	 * with plain stores of its, or with a step in flight at the kill,
	 * holds bytes the writer never published (release consistency does
	 * not promise them to other processes until the file changes
	 * again): counted apart, here and at the next checks while the file
	 * stays unchanged. */
	uint32_t out[PAGES];
	if (write(cmd, "c", 1) != 1 || read(reply, out, sizeof(out)) != (ssize_t)sizeof(out)) {
		int cst;
		pid_t w = waitpid(cons, &cst, WNOHANG);
		printf("survivor: FAIL: trial %lu: the consumer did not answer (%s)\n", current_trial,
		       w == cons ? "it died" : "no reply");
		return -1;
	}
	for (unsigned q = 0; q < PAGES; q++) {
		bool was_stale = stale_unpublished[q];
		stale_unpublished[q] = false;
		if (!out[q])
			continue;
		bool unpublished = false;
		for (size_t b = (size_t)q * PAGE; b < (size_t)(q + 1) * PAGE; b++)
			unpublished |= either[b];
		for (unsigned th = 0; th < THREADS; th++)
			for (unsigned k = 1; k <= done[th]; k++) {
				struct step s = step_of(seed, th, k);
				unpublished |= s.kind == STORE && q >= s.page && q < s.page + s.npages;
			}
		/* Or a page left stale at the last check for that reason, in a
		 * file that has not changed since: a process not under the
		 * shim (the killed writer) is learned of from the file's times,
		 * and a store can land after the time it moved was read. */
		unpublished |= file_unchanged && was_stale;
		stale_unpublished[q] = unpublished;
		if (unpublished) {
			t->device_unpublished += out[q];
			continue;
		}
		printf("survivor: FAIL: trial %lu: the consumer's kernel saw %u bytes of page %u that differ "
		       "from the file; the page's last step was a %s one; steps %u/%u/%u; the file's times "
		       "%s since the last check%s\n", current_trial, out[q], q,
		       source[(size_t)q * PAGE] >= 0 ? kind_name[source[(size_t)q * PAGE]] : "(none)", done[0],
		       done[1], done[2], file_unchanged ? "unchanged" : "changed",
		       was_stale ? ", where it was stale with unpublished stores" : "");
		t->device_stale += out[q];
		lost++;
	}

	t->trials++;
	t->bytes_checked += BYTES;
	return lost ? 1 : 0;
}

/* Objects in /dev/shm of this file's version table (the table itself and
 * half-created ones, "<name>.new-<pid>"). */
static int table_objects(const char *prefix)
{
	int count = 0;
	DIR *d = opendir("/dev/shm");
	for (struct dirent *e; d && (e = readdir(d));)
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
			printf("survivor: /dev/shm/%s\n", e->d_name);
			count++;
		}
	if (d)
		closedir(d);
	return count;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "writer"))
		return writer(argv[2], argv[3], strtoull(argv[4], NULL, 10));
	if (argc == 5 && !strcmp(argv[1], "consumer"))
		return consumer(argv[2], atoi(argv[3]), atoi(argv[4]));
	unsigned long trials = argc > 1 ? strtoul(argv[1], NULL, 10) : DEFAULT_TRIALS;
	if (getenv("CRASH_TRIALS"))
		trials = strtoul(getenv("CRASH_TRIALS"), NULL, 10);
	uint64_t seed = getenv("CRASH_SEED") ? strtoull(getenv("CRASH_SEED"), NULL, 0)
					     : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
	printf("survivor: seed %" PRIu64 " (CRASH_SEED replays), %lu trials\n", seed, trials);
	fflush(stdout);
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);

	char dir[] = "/tmp/crash.XXXXXX", file[64], log[64];
	if (!mkdtemp(dir))
		return 1;
	snprintf(file, sizeof(file), "%s/data", dir);
	snprintf(log, sizeof(log), "%s/log", dir);
	int fd = open(file, O_RDWR | O_CREAT, 0644);
	if (fd < 0 || ftruncate(fd, BYTES))
		return 1;
	close(fd);
	close(open(log, O_RDWR | O_CREAT, 0644));
	struct stat st;
	stat(file, &st);
	char prefix[96];
	snprintf(prefix, sizeof(prefix), "gaia-v1-%u-%llx-%llx", (unsigned)geteuid(), (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);

	int to_cons[2], from_cons[2];
	if (pipe(to_cons) || pipe(from_cons))
		return 1;
	pid_t cons = fork();
	if (cons == 0) {
		char a[16], b[16];
		close(to_cons[1]);
		close(from_cons[0]);
		snprintf(a, sizeof(a), "%d", to_cons[0]);
		snprintf(b, sizeof(b), "%d", from_cons[1]);
		execl(argv[0], argv[0], "consumer", file, a, b, (char *)NULL);
		_exit(127);
	}
	close(to_cons[0]);
	close(from_cons[1]);
	signal(SIGPIPE, SIG_IGN);

	struct totals t = {};
	int failed = 0;
	/* CRASH_FIRST=i starts at trial i of the seed (a replay of one trial:
	 * a trial holds whatever the file holds before it to the same rules). */
	unsigned long first = getenv("CRASH_FIRST") ? strtoul(getenv("CRASH_FIRST"), NULL, 10) : 0;
	for (unsigned long i = first; i < first + trials && !failed; i++) {
		uint64_t s = mix(seed + i);
		current_trial = i;
		/* A tenth of the kills land in the first 2 ms: start-up. */
		long delay = (s >> 9) % 10 == 0 ? (long)((s >> 13) % 2000) : (long)((s >> 13) % MAX_DELAY_US);
		int rc = trial(argv[0], file, log, s, delay, cons, to_cons[1], from_cons[0], &t);
		if (rc < 0)
			failed = 1;
		failed |= rc;
	}
	if (write(to_cons[1], "q", 1) != 1)
		failed = 1;
	int status;
	waitpid(cons, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		printf("survivor: FAIL: the consumer ended with status %#x\n", status);
		failed = 1;
	}
	/* The table goes when its last user stops; users finish exiting a
	 * moment after they are reaped. */
	int objects = 0;
	for (int tries = 0; tries < 40; tries++) {
		bool any = false;
		DIR *d = opendir("/dev/shm");
		for (struct dirent *e; d && (e = readdir(d));)
			any |= strncmp(e->d_name, prefix, strlen(prefix)) == 0;
		if (d)
			closedir(d);
		if (!any)
			break;
		sleep_us(50000);
	}
	bool under_shim = getenv("LD_PRELOAD") && strstr(getenv("LD_PRELOAD"), "libgaia");
	if (under_shim && (objects = table_objects(prefix)))
		printf("survivor: FAIL: %d /dev/shm objects of the version table left\n", objects);
	int strays = 0;
	for (int w = 0; w < 200 && (strays = stray_children(0)); w++)
		sleep_us(10000);
	unlink(file);
	unlink(log);
	rmdir(dir);

	printf("survivor: %lu trials, %lu steps completed; kills per phase: start-up %lu, in flight:", t.trials,
	       t.steps, t.startup_kills);
	for (int k = 0; k < KINDS; k++)
		printf(" %s %lu", kind_name[k], t.in_flight[k]);
	printf("\nsurvivor: %lu bytes checked; lost: %lu synced or written bytes, %lu of %lu bytes of plain "
	       "stores (what the kernel keeps and the shim did not)\n"
	       "survivor: the survivor's kernels: %lu bytes of released pages stale, %lu bytes of pages with "
	       "unpublished stores of the killed writer stale; %lu processes left, %d table objects left\n",
	       t.bytes_checked, t.lost_synced, t.lost_unsynced, t.unsynced_bytes, t.device_stale,
	       t.device_unpublished, t.leftover + (unsigned long)strays, objects);
	bool ok = !failed && !t.lost_synced && !t.lost_unsynced && !t.device_stale && !t.leftover && !strays &&
		  !objects && t.trials == trials;
	printf("survivor: %s\n", ok ? "ok" : "FAILED");
	return ok ? 0 : 1;
}
