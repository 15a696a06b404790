/* io_during_launch — file I/O whose buffers lie inside an mmap'ed file,
 * done by other threads while the main thread hands that file to a kernel
 * for the first time (the first launch gives the file a device copy):
 *   main: 200 times: create a file, map it, publish it to the threads,
 *         launch a kernel on it, cudaDeviceSynchronize, check, retire it;
 *   thread W: pwrite(fd_out, cur + W_AREA + off, 64 KiB) in a loop;
 *   thread R: read(fd_in, cur + R_AREA + off, 64 KiB) in a loop;
 * where cur is the file being launched on. fd_out and fd_in are other,
 * unmapped files. Any error (EFAULT) or short count fails; fd_out must hold
 * the W area's bytes, and each file's R area (mapping and pread()) the
 * chunks of fd_in read into it; the kernel's bytes must be right too.
 * With argument "syscall" the two threads call syscall(SYS_pwrite64, ...)
 * and syscall(SYS_read, ...) instead of the libc functions, as programs
 * and libraries that make raw system calls do. With "socket", W send()s
 * its chunks to a socket a drain thread empties, and R recv()s chunks of
 * fd_in's bytes that a feeder thread sends (fd_out then stays zero). With
 * "mmsg" the same through sendmmsg() and recvmmsg(). With "vm", W copies
 * its chunk out of the mapping with process_vm_readv() on its own process
 * (then pwrite()s the copy), and R copies fd_in's chunk into the mapping
 * with process_vm_writev(), as debuggers and checkpointing tools do.
 * With "chk" R reads through the checked forms that _FORTIFY_SOURCE
 * compiles read() and pread() into where the buffer's size is known
 * (__read_chk, __pread_chk, __pread64_chk in turn; Ubuntu's and Fedora's
 * compilers fortify by default); "socket_chk" is "socket" with R in
 * __recv_chk and __recvfrom_chk. They are looked up as the dynamic linker
 * binds them (the first definition in load order). With "stdio" W and R
 * go through stdio streams on fd_out and fd_in, whose chunks (larger than
 * the streams' buffers) libc moves straight between the mapping and the
 * kernel: W fwrite()s and fflush()es, R fread()s, each in turn with its
 * _unlocked form and R also with __fread_chk and __fread_unlocked_chk.
 */
#include <dlfcn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/uio.h>

#include "programs.h"

#define NFILES 200
#define CHUNK (64 << 10)
#define K_AREA 0			/* the kernel's bytes: 64 KiB */
#define K_BYTES (64 << 10)
#define W_AREA (K_AREA + K_BYTES)	/* pwrite's source: 256 KiB, never written */
#define R_AREA (W_AREA + 4 * CHUNK)	/* read's destination: 256 KiB */
#define FILE_BYTES (R_AREA + 4 * CHUNK)

static int fd_out, fd_in;
static pthread_rwlock_t lock;		/* prefers the main thread (a writer) */
static unsigned char *cur;		/* the file being launched on, or NULL */
static int cur_read[4];			/* R-area chunks read into cur */
static int wrote[4];			/* fd_out chunks written */
static int stop;			/* atomic */
static unsigned long ios_during;	/* I/O calls made with a current file */
static int raw;				/* through syscall() */
static int sock;			/* through send()/recv() (or their mmsg forms) */
static int mmsg;			/* through sendmmsg()/recvmmsg() */
static int vm;				/* through process_vm_readv()/writev() */
static int wsock[2], rsock[2];		/* W sends on wsock[0]; R receives on rsock[0] */
static unsigned long r_next;		/* R's next chunk in socket mode */
static int chk;				/* through the _FORTIFY_SOURCE forms */
static int stdio_mode;			/* through stdio streams */
static FILE *f_out, *f_in;		/* stdio mode: streams on fd_out, fd_in */
static size_t (*fread_chk)(void *, size_t, size_t, size_t, FILE *);
static size_t (*fread_unlocked_chk)(void *, size_t, size_t, size_t, FILE *);
static ssize_t (*read_chk)(int, void *, size_t, size_t);
static ssize_t (*pread_chk)(int, void *, size_t, off_t, size_t);
static ssize_t (*pread64_chk)(int, void *, size_t, off_t, size_t);
static ssize_t (*recv_chk)(int, void *, size_t, size_t, int);
static ssize_t (*recvfrom_chk)(int, void *, size_t, size_t, int, struct sockaddr *, socklen_t *);

static ssize_t do_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	if (mmsg) {
		struct iovec v = {(void *)buf, n};
		struct mmsghdr mm;
		memset(&mm, 0, sizeof(mm));
		mm.msg_hdr.msg_iov = &v;
		mm.msg_hdr.msg_iovlen = 1;
		int r = sendmmsg(wsock[0], &mm, 1, MSG_NOSIGNAL);
		return r == 1 ? (ssize_t)mm.msg_len : -1;
	}
	if (vm) {
		static __thread unsigned char copy[CHUNK];
		struct iovec local = {copy, n}, remote = {(void *)buf, n};
		ssize_t r = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
		return r == (ssize_t)n ? pwrite(fd, copy, n, off) : r;
	}
	if (stdio_mode) {
		static unsigned turn;
		if (fseeko(f_out, off, SEEK_SET) != 0)
			return -1;
		size_t put = turn++ % 2 ? fwrite(buf, 1, n, f_out) : fwrite_unlocked(buf, 1, n, f_out);
		return fflush(f_out) == 0 && !ferror(f_out) ? (ssize_t)put : -1;
	}
	if (sock)
		return send(wsock[0], buf, n, MSG_NOSIGNAL);
	return raw ? (ssize_t)syscall(SYS_pwrite64, fd, buf, n, off) : pwrite(fd, buf, n, off);
}

static ssize_t do_read(int fd, void *buf, size_t n)
{
	if (mmsg) {
		struct iovec v = {buf, n};
		struct mmsghdr mm;
		memset(&mm, 0, sizeof(mm));
		mm.msg_hdr.msg_iov = &v;
		mm.msg_hdr.msg_iovlen = 1;
		int r = recvmmsg(rsock[0], &mm, 1, MSG_WAITALL, NULL);
		return r == 1 ? (ssize_t)mm.msg_len : -1;
	}
	if (vm) {
		static __thread unsigned char copy[CHUNK];
		ssize_t got = read(fd, copy, n);
		if (got != (ssize_t)n)
			return got;
		struct iovec local = {copy, n}, remote = {buf, n};
		return process_vm_writev(getpid(), &local, 1, &remote, 1, 0);
	}
	static __thread unsigned turn;
	if (chk && sock)
		return turn++ % 2 ? recv_chk(rsock[0], buf, n, CHUNK, MSG_WAITALL)
				  : recvfrom_chk(rsock[0], buf, n, CHUNK, MSG_WAITALL, NULL, NULL);
	if (chk) {
		off_t pos = lseek(fd, 0, SEEK_CUR);
		switch (turn++ % 3) {
		case 0: return read_chk(fd, buf, n, CHUNK);
		case 1: return pread_chk(fd, buf, n, pos, CHUNK);
		default: return pread64_chk(fd, buf, n, pos, CHUNK);
		}
	}
	if (stdio_mode) {
		if (fseeko(f_in, lseek(fd, 0, SEEK_CUR), SEEK_SET) != 0)
			return -1;
		size_t got;
		switch (turn++ % 4) {
		case 0: got = fread(buf, 1, n, f_in); break;
		case 1: got = fread_unlocked(buf, 1, n, f_in); break;
		case 2: got = fread_chk(buf, CHUNK, 1, n, f_in); break;
		default: got = fread_unlocked_chk(buf, CHUNK, 1, n, f_in); break;
		}
		return ferror(f_in) ? -1 : (ssize_t)got;
	}
	if (sock)
		return recv(rsock[0], buf, n, MSG_WAITALL);
	return raw ? (ssize_t)syscall(SYS_read, fd, buf, n) : read(fd, buf, n);
}

/* What fd names now, its size and position: for a failure message. */
static const char *describe_fd(int fd)
{
	static __thread char out[600];
	char link[64], target[400];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	target[n > 0 ? n : 0] = 0;
	struct stat st;
	long long size = fstat(fd, &st) == 0 ? (long long)st.st_size : -1;
	snprintf(out, sizeof(out), "descriptor %d names %s, size %lld, position %lld", fd,
		 n > 0 ? target : "(unreadable)", size, (long long)lseek(fd, 0, SEEK_CUR));
	return out;
}

/* The lines of /proc/self/maps over [p, p + len), on stderr. */
static void print_maps_over(const void *p, size_t len)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	unsigned long s = (unsigned long)p, e = s + len, a, b;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", &a, &b) == 2 && a < e && s < b)
			fprintf(stderr, "  maps: %s", line);
	if (f)
		fclose(f);
}

static unsigned char file_byte(size_t i) { return (unsigned char)(i * 3 + 11 + (i >> 16)); }
static unsigned char in_byte(size_t i) { return (unsigned char)(i * 7 + 1 + (i >> 14)); }

__global__ void xor_bytes(unsigned char *m, unsigned long long n, unsigned char v)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		m[i] ^= v;
}
SIMGPU_KERNEL(xor_bytes);

static void *writer(void *arg)
{
	(void)arg;
	for (unsigned long k = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); k++) {
		size_t c = k % 4;
		pthread_rwlock_rdlock(&lock);
		int idle = cur == NULL;
		if (!idle) {
			ssize_t r = do_pwrite(fd_out, cur + W_AREA + c * CHUNK, CHUNK, (off_t)(c * CHUNK));
			CHECK(r == CHUNK, "pwrite of 64 KiB from the mapped file returned %zd (%s)", r,
			      r < 0 ? strerror(errno) : "short count");
			if (!sock)
				__atomic_store_n(&wrote[c], 1, __ATOMIC_RELAXED);
			__atomic_add_fetch(&ios_during, 1, __ATOMIC_RELAXED);
		}
		pthread_rwlock_unlock(&lock);
		if (idle)
			usleep(100);
	}
	return NULL;
}

static void *reader(void *arg)
{
	(void)arg;
	for (unsigned long k = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); k++) {
		size_t c = ((sock ? r_next : k) * 3) % 4;
		pthread_rwlock_rdlock(&lock);
		int idle = cur == NULL;
		if (!idle) {
			CHECK(sock || lseek(fd_in, (off_t)(c * CHUNK), SEEK_SET) == (off_t)(c * CHUNK), "lseek: %s",
			      strerror(errno));
			ssize_t r = do_read(fd_in, cur + R_AREA + c * CHUNK, CHUNK);
			if (r != CHUNK) {
				int e = errno;
				print_maps_over(cur, FILE_BYTES);
				errno = e;
			}
			CHECK(r == CHUNK, "read of 64 KiB at %zu into the mapped file returned %zd (%s); %s", c * CHUNK,
			      r, r < 0 ? strerror(errno) : "short count", sock ? "socket" : describe_fd(fd_in));
			__atomic_store_n(&cur_read[c], 1, __ATOMIC_RELAXED);
			r_next++;
			__atomic_add_fetch(&ios_during, 1, __ATOMIC_RELAXED);
		}
		pthread_rwlock_unlock(&lock);
		if (idle)
			usleep(100);
	}
	return NULL;
}

/* Socket mode: sends fd_in's chunks in R's order until the socket closes. */
static void *feeder(void *arg)
{
	(void)arg;
	unsigned char *chunk = (unsigned char *)malloc(CHUNK);
	CHECK(chunk != NULL, "malloc");
	for (unsigned long n = 0;; n++) {
		size_t c = (n * 3) % 4;
		for (size_t i = 0; i < CHUNK; i++)
			chunk[i] = in_byte(c * CHUNK + i);
		if (send(rsock[1], chunk, CHUNK, MSG_NOSIGNAL) != CHUNK)
			break;
	}
	free(chunk);
	return NULL;
}

/* Socket mode: empties W's socket. */
static void *drain(void *arg)
{
	(void)arg;
	static unsigned char buf[CHUNK];
	while (recv(wsock[1], buf, sizeof(buf), 0) > 0)
		;
	return NULL;
}

/* What file byte i must be: kernel area xor'ed, R area chunks read or not. */
static unsigned char want_byte(size_t i)
{
	if (i < K_AREA + K_BYTES)
		return (unsigned char)(file_byte(i) ^ 0x5a);
	if (i >= R_AREA && cur_read[(i - R_AREA) / CHUNK])
		return in_byte(i - R_AREA);
	return file_byte(i);
}

/* stdio mode, first: the main thread holds f_in (flockfile) and launches
 * on a fresh file for the first time while another thread waits in
 * fread() from f_in into that file. The launch must not wait for the
 * reader, which waits for the stream. */
static unsigned char *held_target;

static void *held_reader(void *arg)
{
	(void)arg;
	return (void *)fread(held_target + R_AREA, 1, CHUNK, f_in);
}

static void launch_holding_stream(void)
{
	step = "a launch while this thread holds the stream another thread fread()s into the file";
	int fd = make_file(FILE_BYTES, file_byte);
	unsigned char *m = (unsigned char *)map_file(fd, FILE_BYTES);
	held_target = m;
	flockfile(f_in);
	CHECK(fseeko(f_in, 0, SEEK_SET) == 0, "fseeko: %s", strerror(errno));
	pthread_t t;
	CHECK(pthread_create(&t, NULL, held_reader, NULL) == 0, "pthread_create");
	usleep(200 * 1000); /* the reader is in fread(), waiting for the stream */
	SIMGPU_LAUNCH(xor_bytes, 8, 128, 0, 0)(m + K_AREA, (unsigned long long)K_BYTES, (unsigned char)0x5a);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	funlockfile(f_in);
	void *got;
	CHECK(pthread_join(t, &got) == 0, "pthread_join");
	CHECK((size_t)got == CHUNK, "fread of 64 KiB into the mapped file returned %zu", (size_t)got);
	for (size_t i = 0; i < K_BYTES; i++)
		CHECK(m[K_AREA + i] == (unsigned char)(file_byte(K_AREA + i) ^ 0x5a), "kernel byte %zu is %#x", i,
		      m[K_AREA + i]);
	for (size_t i = 0; i < CHUNK; i++)
		CHECK(m[R_AREA + i] == in_byte(i), "byte %zu fread() into the mapping is %#x, want %#x", i,
		      m[R_AREA + i], in_byte(i));
	CHECK(munmap(m, FILE_BYTES) == 0, "munmap: %s", strerror(errno));
	close(fd);
}

int main(int argc, char **argv)
{
	raw = argc > 1 && strcmp(argv[1], "syscall") == 0;
	mmsg = argc > 1 && strcmp(argv[1], "mmsg") == 0;
	vm = argc > 1 && strcmp(argv[1], "vm") == 0;
	stdio_mode = argc > 1 && strcmp(argv[1], "stdio") == 0;
	if (stdio_mode) {
		*(void **)&fread_chk = dlsym(RTLD_DEFAULT, "__fread_chk");
		*(void **)&fread_unlocked_chk = dlsym(RTLD_DEFAULT, "__fread_unlocked_chk");
		CHECK(fread_chk && fread_unlocked_chk, "libc has no __fread_chk: %s", dlerror());
		for (int form = 0; form < 2; form++) { /* the check stays (below, for chk) */
			pid_t child = fork();
			CHECK(child >= 0, "fork: %s", strerror(errno));
			if (child == 0) {
				FILE *zero = fopen("/dev/zero", "r");
				char small[8];
				signal(SIGABRT, SIG_DFL);
				close(2);
				if (form == 0)
					fread_chk(small, sizeof(small), 4, 4, zero);
				else
					fread_unlocked_chk(small, sizeof(small), 4, 4, zero);
				_exit(0);
			}
			int status;
			CHECK(waitpid(child, &status, 0) == child, "waitpid: %s", strerror(errno));
			CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
			      "checked fread form %d with a count past its buffer: status %#x, not SIGABRT", form,
			      status);
		}
	}
	chk = argc > 1 && (strcmp(argv[1], "chk") == 0 || strcmp(argv[1], "socket_chk") == 0);
	sock = mmsg || (argc > 1 && (strcmp(argv[1], "socket") == 0 || strcmp(argv[1], "socket_chk") == 0));
	if (chk) {
		*(void **)&read_chk = dlsym(RTLD_DEFAULT, "__read_chk");
		*(void **)&pread_chk = dlsym(RTLD_DEFAULT, "__pread_chk");
		*(void **)&pread64_chk = dlsym(RTLD_DEFAULT, "__pread64_chk");
		*(void **)&recv_chk = dlsym(RTLD_DEFAULT, "__recv_chk");
		*(void **)&recvfrom_chk = dlsym(RTLD_DEFAULT, "__recvfrom_chk");
		CHECK(read_chk && pread_chk && pread64_chk && recv_chk && recvfrom_chk,
		      "libc has no _FORTIFY_SOURCE forms: %s", dlerror());
		/* Their check stays: a count past the buffer aborts, as libc's do. */
		for (int form = 0; form < 5; form++) {
			pid_t child = fork();
			CHECK(child >= 0, "fork: %s", strerror(errno));
			if (child == 0) {
				int devnull = open("/dev/zero", O_RDONLY);
				char small[8];
				signal(SIGABRT, SIG_DFL);
				close(2); /* libc's "buffer overflow detected" */
				switch (form) {
				case 0: read_chk(devnull, small, 16, sizeof(small)); break;
				case 1: pread_chk(devnull, small, 16, 0, sizeof(small)); break;
				case 2: pread64_chk(devnull, small, 16, 0, sizeof(small)); break;
				case 3: recv_chk(devnull, small, 16, sizeof(small), 0); break;
				default: recvfrom_chk(devnull, small, 16, sizeof(small), 0, NULL, NULL); break;
				}
				_exit(0);
			}
			int status;
			CHECK(waitpid(child, &status, 0) == child, "waitpid: %s", strerror(errno));
			CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
			      "checked form %d with a count past its buffer: status %#x, not SIGABRT", form, status);
		}
	}
	watchdog(60);
	CUDA_OK(cudaSetDevice(0));
	pthread_rwlockattr_t ra;
	pthread_rwlockattr_init(&ra);
	pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	CHECK(pthread_rwlock_init(&lock, &ra) == 0, "pthread_rwlock_init");
	fd_out = make_file(4 * CHUNK, NULL);
	fd_in = make_file(4 * CHUNK, in_byte);
	if (stdio_mode) {
		f_out = fdopen(dup(fd_out), "r+");
		f_in = fdopen(dup(fd_in), "r");
		CHECK(f_out && f_in, "fdopen: %s", strerror(errno));
	}
	pthread_t tw, tr, tf, td;
	if (sock) {
		CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, wsock) == 0, "socketpair: %s", strerror(errno));
		CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, rsock) == 0, "socketpair: %s", strerror(errno));
		CHECK(pthread_create(&tf, NULL, feeder, NULL) == 0, "pthread_create");
		CHECK(pthread_create(&td, NULL, drain, NULL) == 0, "pthread_create");
	}
	if (stdio_mode)
		launch_holding_stream();
	CHECK(pthread_create(&tw, NULL, writer, NULL) == 0, "pthread_create");
	CHECK(pthread_create(&tr, NULL, reader, NULL) == 0, "pthread_create");

	char where[100];
	step = where;
	unsigned char *buf = (unsigned char *)malloc(FILE_BYTES);
	for (int f = 0; f < NFILES; f++) {
		snprintf(where, sizeof(where), "first launch on fresh file %d of %d", f + 1, NFILES);
		int fd = make_file(FILE_BYTES, file_byte);
		unsigned char *m = (unsigned char *)map_file(fd, FILE_BYTES);
		pthread_rwlock_wrlock(&lock);
		cur = m;
		memset(cur_read, 0, sizeof(cur_read));
		pthread_rwlock_unlock(&lock);

		SIMGPU_LAUNCH(xor_bytes, 8, 128, 0, 0)(m + K_AREA, (unsigned long long)K_BYTES, (unsigned char)0x5a);
		CUDA_OK(cudaGetLastError());
		CUDA_OK(cudaDeviceSynchronize());

		pthread_rwlock_wrlock(&lock);	/* no I/O into m from here on */
		cur = NULL;
		pread_all(fd, buf, FILE_BYTES, 0);
		for (size_t i = 0; i < FILE_BYTES; i++) {
			unsigned char want = want_byte(i);
			const char *area = i < W_AREA ? "kernel" : i < R_AREA ? "pwrite source" : "read() destination";
			CHECK(m[i] == want, "fresh file %d: byte %zu (%s area) through the mapping is %#x, want %#x",
			      f + 1, i, area, m[i], want);
			CHECK(buf[i] == want, "fresh file %d: byte %zu (%s area) read with pread() is %#x, want %#x",
			      f + 1, i, area, buf[i], want);
		}
		pthread_rwlock_unlock(&lock);
		CHECK(munmap(m, FILE_BYTES) == 0, "munmap: %s", strerror(errno));
		close(fd);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	pthread_join(tw, NULL);
	pthread_join(tr, NULL);
	if (sock) {
		shutdown(wsock[0], SHUT_RDWR);
		shutdown(rsock[0], SHUT_RDWR);
		pthread_join(tf, NULL);
		pthread_join(td, NULL);
	}

	step = "checking fd_out";
	CHECK(ios_during > 0, "the I/O threads made no calls during the %d launches", NFILES);
	pread_all(fd_out, buf, 4 * CHUNK, 0);
	for (size_t i = 0; i < 4 * CHUNK; i++) {
		unsigned char want = wrote[i / CHUNK] ? file_byte(W_AREA + i) : 0;
		CHECK(buf[i] == want, "fd_out byte %zu (written by pwrite from the mapping) is %#x, want %#x", i,
		      buf[i], want);
	}
	free(buf);
	printf("ok io_during_launch: %lu I/O calls%s on files being launched on\n", ios_during,
	       raw ? " through syscall()" : mmsg ? " through sendmmsg() and recvmmsg()"
	       : sock ? " through send() and recv()" : vm ? " through process_vm_readv() and process_vm_writev()" : "");
	return 0;
}
