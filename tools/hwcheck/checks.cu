/* checks.cu — the checks of gaia-hwcheck that use the GPU, each group run
 * in a child process of its own (hwcheck.h), and the table of every check:
 * its id, what it does, and what is expected.
 *
 * Expectations come from research/gpu_ondemand.md §5 and
 * research/cuda_interpose.md §6 ("memo"), and from the first run on a real
 * GPU: an NVIDIA H200, driver 580.159.04 (open kernel module), CUDA 13.0,
 * Linux 6.18, Ubuntu 24.04, nvidia-smi "Addressing Mode: None",
 * uvm_disable_hmm N, no CONFIG_DEVICE_PRIVATE, so no HMM ("H200"). Where
 * the two disagree the H200's answer comes first and decides the verdict,
 * except for the HMM checks, whose expectation follows attribute 88.
 *
 * One source for both GPUs: kernels go through simgpu_kernel.h, compiled
 * by g++ for the simulated GPU and by nvcc for a real one.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <initializer_list>
#include <string>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "simgpu_kernel.h"
#include "uffd_abi.h"

#include "hwcheck.h"

#define PAGE 4096ul
#define MiB (1ul << 20)

/* ---- kernels ---- */

/* Adds up n 64-bit words (grid-stride), one atomic per thread. */
__global__ void hw_sum(const unsigned long long *p, unsigned long long n, unsigned long long *out)
{
	unsigned long long s = 0;
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		s += p[i];
	atomicAdd(out, s);
}
SIMGPU_KERNEL(hw_sum);

/* Thread t < 3 stores v at the first byte of page a, b or c. */
__global__ void hw_store_pages(unsigned char *p, unsigned a, unsigned b, unsigned c, unsigned char v)
{
	unsigned t = threadIdx.x;
	unsigned page = t == 0 ? a : t == 1 ? b : c;
	if (t < 3)
		p[(unsigned long long)page * 4096] = v;
}
SIMGPU_KERNEL(hw_store_pages);

/* Thread t < 3 adds 1 to the first word of page a, b or c, atomically. */
__global__ void hw_atomic_pages(unsigned *p, unsigned a, unsigned b, unsigned c)
{
	unsigned t = threadIdx.x;
	unsigned page = t == 0 ? a : t == 1 ? b : c;
	if (t < 3)
		atomicAdd(p + (unsigned long long)page * 1024, 1u);
}
SIMGPU_KERNEL(hw_atomic_pages);

__global__ void hw_fill(unsigned char *p, unsigned long long n, unsigned char v)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		p[i] = v;
}
SIMGPU_KERNEL(hw_fill);

__global__ void hw_copy(const unsigned char *src, unsigned char *dst, unsigned long long n)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		dst[i] = src[i];
}
SIMGPU_KERNEL(hw_copy);

/* Reads one byte every `stride` bytes, `count` of them, and adds them up. */
__global__ void hw_touch(const unsigned char *p, unsigned long long stride, unsigned long long count,
			 unsigned long long *out)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < count)
		atomicAdd(out, (unsigned long long)p[i * stride]);
}
SIMGPU_KERNEL(hw_touch);

/* ---- the table of checks ---- */

const bool hw_simulated = HWCHECK_SIMULATED;

#define NO_HMM_FAULT "no HMM (attribute 88 = 0): cudaErrorIllegalAddress, as on the H200"

const struct hw_check hw_checks[] = {
	{"E1.gpu", NULL, "nvidia-smi -L", "a GPU (H200 on the reference host)"},
	{"E1.addressing", NULL, "nvidia-smi -q: Addressing Mode", "None (H200); memo: HMM on x86 with open modules"},
	{"E1.driver", NULL, "/proc/driver/nvidia/version", "Open Kernel Module (H200: 580.159.04; memo)"},
	{"E1.hmm", NULL, "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm", "N (H200, memo)"},
	{"E1.kernel", NULL, "uname -r", ">= 6.1.24, which HMM needs (memo; H200: 6.18)"},

	{"E2.device", "E2", "cuDeviceGetName, compute capability, cuDriverGetVersion",
	 "recorded (H200: NVIDIA H200, 9.0, 13000)"},
	{"E2.86", "E2", "attribute 86 HOST_NATIVE_ATOMIC_SUPPORTED", "0 (H200, memo)"},
	{"E2.88", "E2", "attribute 88 PAGEABLE_MEMORY_ACCESS (HMM or ATS)",
	 "0 (H200: no HMM); memo: 1 with HMM, else 0"},
	{"E2.89", "E2", "attribute 89 CONCURRENT_MANAGED_ACCESS", "1 (H200, memo)"},
	{"E2.91", "E2", "attribute 91 CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM", "1 (H200, memo)"},
	{"E2.99", "E2", "attribute 99 HOST_REGISTER_SUPPORTED", "1 (H200, memo)"},
	{"E2.100", "E2", "attribute 100 PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES (ATS)", "0 (H200, memo)"},
	{"E2.113", "E2", "attribute 113 READ_ONLY_HOST_REGISTER_SUPPORTED", "1 (H200, memo)"},

	{"H1", "H1",
	 "a kernel sums a 64 MiB MAP_SHARED file mapping through the mapping's own pointer; the CPU sums it too",
	 NO_HMM_FAULT "; with HMM (memo): the sums match, no GPU memory growth, PCIe-bound GB/s"},
	{"H3", "H3",
	 "H1 with the file's pages out of the page cache first (fsync, POSIX_FADV_DONTNEED); mincore afterwards",
	 NO_HMM_FAULT "; with HMM (memo): the sums match, slower, the pages resident afterwards"},
	{"H4", "H4", "cuMemPrefetchAsync(the file mapping, 64 MiB, GPU 0), then a kernel sums it",
	 NO_HMM_FAULT " (the prefetch's answer was not measured there); with HMM (memo): the prefetch "
	 "succeeds and the sums match"},
	{"H5.store", "H5s",
	 "a kernel stores to pages 3, 7 and 11 of a read-write MAP_SHARED file mapping; pread after the sync",
	 NO_HMM_FAULT "; with HMM (memo): pread sees the stores"},
	{"H5.atomic", "H5a", "a kernel does atomicAdd on pages 3, 7 and 11 of a read-write MAP_SHARED file mapping",
	 "cudaErrorIllegalAddress: without HMM the GPU cannot reach the file (H200); with HMM atomics on "
	 "MAP_SHARED files are a fatal fault (memo)"},

	{"Z1.rw", "Z", "cuMemHostRegister(DEVICEMAP) of a 64 MiB read-write MAP_SHARED file mapping in $TMPDIR",
	 "CUDA_ERROR_INVALID_VALUE (H200); memo: refused on ext4/xfs (a writable long-term pin), "
	 "CUDA_SUCCESS on tmpfs"},
	{"Z1.ro", "Z", "cuMemHostRegister(READ_ONLY | DEVICEMAP) of the same mapping", "CUDA_SUCCESS (H200, memo)"},
	{"Z2.ptr", "Z", "cuMemHostGetDevicePointer of the read-only registration",
	 "the host pointer itself (H200, memo)"},
	{"Z2.read", "Z",
	 "the CPU stores a byte through the mapping after registering; a kernel reads it through the registration",
	 "the kernel sees the new byte (memo)"},
	{"Z4", "Z4", "cuMemHostRegister(READ_ONLY | DEVICEMAP) of a 256 MiB file mapping, page cache warm",
	 "recorded; memo: 1-2 GB/s"},
	{"Z5", "Z5",
	 "userfaultfd write-protect (async) on a 1 MiB file mapping, a READ_ONLY registration, the CPU stores to "
	 "17 pages, PAGEMAP_SCAN",
	 "exactly 17 written pages, none from the registration (memo)"},

	{"M1.missing", "M1", "UFFDIO_REGISTER (MISSING) on a 2 MiB cuMemAllocManaged range", "EINVAL (H200, memo)"},
	{"M1.wp", "M1", "UFFDIO_REGISTER (WP) on the same range", "EINVAL (H200, memo)"},
	{"M2.4k", "M2", "256 MiB of managed memory written by the CPU, then a kernel reads one byte per 4 KiB",
	 "recorded; memo: near PCIe speed"},
	{"M2.2m", "M2", "the same after the CPU writes it all again, one byte per 2 MiB",
	 "recorded; memo: far below (a fault per touch)"},
	{"M5.dma", "M5d",
	 "the device filled but for 8 MiB (cudaMalloc); 16 MiB of managed memory filled by cudaMemcpyAsync from "
	 "pinned memory, 2 MiB a copy, two in flight (as the shim uploads a paged replica); a kernel sums it",
	 "recorded (not yet run on a GPU); the shim's uploads into a paged replica (2 MiB copies from pinned memory) ended the context on the H200 with 3, 5 and 13 MiB free, not with 25 (docs/hardware.md)"},
	{"M5.cpu", "M5c",
	 "the same 16 MiB filled by the CPU (memcpy), then cudaMemPrefetchAsync to the device; a kernel sums it",
	 "recorded (not yet run on a GPU); without the shim a 16 MiB prefetch with 7 MiB free, then a kernel, "
	 "ran on the H200 (docs/hardware.md)"},
	{"M5.fit", "M5f", "M5.dma with 64 MiB free", "the sums match (H200: the shim's uploads worked with 25 MiB free)"},
	{"X1", NULL, "UVM tools events (UVM_TOOLS_INIT_EVENT_TRACKER_V2) read from inside the process",
	 "fault events with addresses (memo)"},
	{"S1", NULL, "cuobjdump -sass of the nvcc-built workload kernels: STG, ATOM, RED per kernel",
	 "recorded; memo: collage's search kernels store nothing to the database, SSSP stores only to its "
	 "distance and frontier arrays"},

	{"I1.cuLaunchKernel", "I", "cuGetProcAddress(\"cuLaunchKernel\", 13000, 0) against dlsym(libcuda.so.1, "
	 "\"cuLaunchKernel\")", "the same pointer (H200)"},
	{"I1.cuCtxSynchronize", "I", "cuGetProcAddress(\"cuCtxSynchronize\", 13000, 0) against dlsym "
	 "\"cuCtxSynchronize_v2\"", "the same pointer (H200)"},
	{"I1.cuMemcpyHtoD", "I", "cuGetProcAddress(\"cuMemcpyHtoD\", 13000, 0) against dlsym \"cuMemcpyHtoD_v2\"",
	 "the same pointer (H200)"},
	{"I2.func(CUfunction)", "I",
	 "cuFuncGetParamInfo(the CUfunction of cudaGetFuncBySymbol, 0..2), a kernel of three 8-byte parameters",
	 "CUDA_SUCCESS 0+8 8+8 16+8 (H200)"},
	{"I2.func(CUkernel)", "I", "cuFuncGetParamInfo(the CUkernel of cudaGetKernel, 0)",
	 "CUDA_ERROR_INVALID_HANDLE (H200)"},
	{"I2.kernel(CUkernel)", "I", "cuKernelGetParamInfo(the CUkernel, 0..2)", "CUDA_SUCCESS 0+8 8+8 16+8 (H200)"},
	{"I2.kernel(CUfunction)", "I", "cuKernelGetParamInfo(the CUfunction, 0)", "recorded (not measured on the H200)"},
	{"I2.func.past-last", "I", "cuFuncGetParamInfo(CUfunction, 3): past the last parameter",
	 "CUDA_ERROR_INVALID_VALUE (H200)"},
	{"I2.kernel.past-last", "I", "cuKernelGetParamInfo(CUkernel, 3)", "CUDA_ERROR_INVALID_VALUE (H200)"},

	{"V1.2M@32M", "V1", "cuMemAddressReserve(2 MiB) hinted at a free 32 MiB-aligned address",
	 "not honoured (H200: 2 MiB hints never are; the driver sub-allocates its own 32 MiB chunks)"},
	{"V1.32M@32M", "V1", "cuMemAddressReserve(32 MiB) hinted at a free 32 MiB-aligned address",
	 "honoured (H200: 30 MiB and more at a 32 MiB-aligned free address)"},
	{"V1.2M@2M", "V1", "cuMemAddressReserve(2 MiB) hinted at a free address aligned to 2 MiB, not 32 MiB",
	 "not honoured (H200)"},
	{"V1.32M@2M", "V1", "cuMemAddressReserve(32 MiB) hinted at a free address aligned to 2 MiB, not 32 MiB",
	 "moved to the next 32 MiB boundary (H200)"},
	{"V2", "V2",
	 "device memory mapped at a reserved range (cuMemCreate, cuMemMap, cuMemSetAccess), a file mapping laid "
	 "MAP_FIXED over its host side; a kernel stores 0x55 there, the file holds 0xaa",
	 "the device sees 0x55, the host mapping 0xaa (H200)"},
	{"V3.b", "V2", "then the file mapping replaced by PROT_NONE anonymous memory; cuMemUnmap, cuMemRelease, "
	 "cuMemAddressFree", "cuMemAddressFree: CUDA_SUCCESS (H200)"},
	{"V3.a", "V3", "as V2, then cuMemUnmap, cuMemRelease, cuMemAddressFree with the file still laid over it",
	 "cuMemAddressFree: CUDA_SUCCESS, and the file mapping is gone: nothing mapped there (H200)"},
	{"V3.c", "V3", "as V2, cuMemAddressFree before cuMemUnmap (then cuMemUnmap, cuMemRelease, cuMemAddressFree)",
	 "the early cuMemAddressFree: CUDA_ERROR_INVALID_VALUE, the rest CUDA_SUCCESS"},
	{NULL, NULL, NULL, NULL},
};

const struct hw_group hw_groups[] = {
	{"E2", "E2.device E2.86 E2.88 E2.89 E2.91 E2.99 E2.100 E2.113"},
	{"H1", "H1"},
	{"H3", "H3"},
	{"H4", "H4"},
	{"H5s", "H5.store"},
	{"H5a", "H5.atomic"},
	{"Z", "Z1.rw Z1.ro Z2.ptr Z2.read"},
	{"Z4", "Z4"},
	{"Z5", "Z5"},
	{"M1", "M1.missing M1.wp"},
	{"M2", "M2.4k M2.2m"},
	{"M5d", "M5.dma"},
	{"M5c", "M5.cpu"},
	{"M5f", "M5.fit"},
	{"I", "I1.cuLaunchKernel I1.cuCtxSynchronize I1.cuMemcpyHtoD I2.func(CUfunction) I2.func(CUkernel) "
	      "I2.kernel(CUkernel) I2.kernel(CUfunction) I2.func.past-last I2.kernel.past-last"},
	{"V1", "V1.2M@32M V1.32M@32M V1.2M@2M V1.32M@2M"},
	{"V2", "V2 V3.b"},
	{"V3", "V3.a V3.c"},
	{NULL, NULL},
};

/* ---- reporting ---- */

static std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static std::string fmt(const char *f, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, f);
	vsnprintf(buf, sizeof(buf), f, ap);
	va_end(ap);
	return buf;
}

/* One result line for the parent: ROW <tab> id <tab> observed <tab> verdict. */
static void report(const char *id, const std::string &observed, const char *verdict)
{
	std::string o = observed;
	for (char &c : o)
		if (c == '\t' || c == '\n')
			c = ' ';
	printf("ROW\t%s\t%s\t%s\n", id, o.c_str(), verdict);
	fflush(stdout);
}

/* The verdict of an observation that was compared with its expectation. */
static const char *judge(bool matches)
{
	return HWCHECK_SIMULATED ? V_SIMULATED : matches ? V_OK : V_DIFFERS;
}

static std::string cu_name(CUresult r)
{
	const char *s = NULL;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s)
		return fmt("CUresult %d", (int)r);
	return s;
}

static std::string rt_name(cudaError_t e)
{
	return cudaGetErrorName(e);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

const char *hw_tmpdir(void)
{
	const char *d = getenv("TMPDIR");
	return d && *d ? d : "/tmp";
}

const char *hw_fs_name(int fd)
{
	struct statfs s;
	if (fstatfs(fd, &s))
		return "unknown";
	switch ((unsigned long)s.f_type) {
	case EXT4_SUPER_MAGIC:
		return "ext4";
	case XFS_SUPER_MAGIC:
		return "xfs";
	case BTRFS_SUPER_MAGIC:
		return "btrfs";
	case TMPFS_MAGIC:
		return "tmpfs";
	case OVERLAYFS_SUPER_MAGIC:
		return "overlayfs";
	case 0x01021997ul:
		return "9p";
	case 0x65735546ul:
		return "fuse";
	case 0x6e667364ul:
		return "nfs";
	default:
		return "other";
	}
}

/* ---- scratch files ---- */

/* Word i of a pattern file: never zero, so a page the GPU did not reach
 * changes the sum. */
static unsigned long long pattern_word(unsigned long long i)
{
	return (i + 1) * 0x9E3779B97F4A7C15ull;
}

/* The sum of pattern_word(0..n-1), modulo 2^64, without reading the file. */
static unsigned long long pattern_sum(unsigned long long n)
{
	unsigned long long a = n, b = n + 1;
	if (a % 2 == 0)
		a /= 2;
	else
		b /= 2;
	return a * b * 0x9E3779B97F4A7C15ull;
}

/* A new unlinked file of `bytes` bytes in hw_tmpdir(): pattern words, or
 * every byte `fill` when pattern is false. -1 with `why` set on failure. */
static int scratch_file(size_t bytes, bool pattern, unsigned char fill, std::string &why)
{
	std::string path = std::string(hw_tmpdir()) + "/gaia-hwcheck-XXXXXX";
	int fd = mkstemp(&path[0]);
	if (fd < 0) {
		why = fmt("mkstemp %s: %s", path.c_str(), strerror(errno));
		return -1;
	}
	unlink(path.c_str());
	const size_t chunk = MiB;
	unsigned long long *buf = (unsigned long long *)malloc(chunk);
	if (!buf) {
		close(fd);
		why = "malloc";
		return -1;
	}
	for (size_t off = 0; off < bytes; off += chunk) {
		size_t n = bytes - off < chunk ? bytes - off : chunk;
		if (pattern)
			for (size_t i = 0; i < n / 8; i++)
				buf[i] = pattern_word(off / 8 + i);
		else
			memset(buf, fill, n);
		if (pwrite(fd, buf, n, (off_t)off) != (ssize_t)n) {
			why = fmt("pwrite %s: %s", path.c_str(), strerror(errno));
			free(buf);
			close(fd);
			return -1;
		}
	}
	free(buf);
	return fd;
}

static void *map_file(int fd, size_t bytes, int prot, std::string &why)
{
	void *p = mmap(NULL, bytes, prot, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		why = fmt("mmap: %s", strerror(errno));
		return NULL;
	}
	return p;
}

/* ---- GPU helpers ---- */

static bool gpu_init(std::string &why)
{
	cudaError_t e = cudaSetDevice(0);
	if (e == cudaSuccess)
		e = cudaFree(0); /* creates the primary context, current from now on */
	if (e != cudaSuccess) {
		why = "no CUDA device: " + rt_name(e);
		return false;
	}
	return true;
}

static int attribute(int which)
{
	CUdevice dev;
	int v = -1;
	if (cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
	    cuDeviceGetAttribute(&v, (CUdevice_attribute)which, dev) != CUDA_SUCCESS)
		return -1;
	return v;
}

/* Whether the GPU can reach pageable memory (HMM or ATS), attribute 88. */
static bool have_hmm(void)
{
	return attribute(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS) == 1;
}

struct sum_result {
	cudaError_t err;        /* the launch's error, else the sync's */
	const char *where;      /* "launch" or "sync" */
	unsigned long long sum;
	double secs;
	long long grown_mib;    /* GPU memory in use after less before */
};

/* hw_sum over `bytes` at p, timed; the context is dead after a fault. */
static sum_result gpu_sum(const void *p, size_t bytes)
{
	sum_result r = {cudaSuccess, "", 0, 0, 0};
	unsigned long long *d_out = NULL;
	size_t free0 = 0, free1 = 0, total = 0;
	r.where = "cudaMalloc";
	if ((r.err = cudaMalloc((void **)&d_out, sizeof(*d_out))) != cudaSuccess ||
	    (r.err = cudaMemset(d_out, 0, sizeof(*d_out))) != cudaSuccess ||
	    (r.err = cudaMemGetInfo(&free0, &total)) != cudaSuccess)
		return r;
	double t0 = now_s();
	SIMGPU_LAUNCH(hw_sum, 264, 256, 0, 0)((const unsigned long long *)p, (unsigned long long)(bytes / 8), d_out);
	r.where = "launch";
	if ((r.err = cudaGetLastError()) != cudaSuccess)
		return r;
	r.where = "sync";
	if ((r.err = cudaDeviceSynchronize()) != cudaSuccess)
		return r;
	r.secs = now_s() - t0;
	r.where = "copy back";
	if ((r.err = cudaMemcpy(&r.sum, d_out, sizeof(r.sum), cudaMemcpyDeviceToHost)) != cudaSuccess)
		return r;
	if (cudaMemGetInfo(&free1, &total) == cudaSuccess)
		r.grown_mib = ((long long)free0 - (long long)free1) / (long long)MiB;
	r.where = "";
	return r;
}

static std::string describe_sum(const sum_result &r, unsigned long long want, size_t bytes)
{
	if (r.err != cudaSuccess)
		return fmt("%s at the %s", rt_name(r.err).c_str(), r.where);
	if (r.sum != want)
		return fmt("the sums differ: GPU %#llx, CPU %#llx", r.sum, want);
	return fmt("the sums match; %.2f GB/s; GPU memory in use %+lld MiB", bytes / r.secs / 1e9, r.grown_mib);
}

/* What a group reports for every check when there is no GPU to run on. */
static int no_gpu(const char *group, const std::string &why)
{
	for (const struct hw_group *g = hw_groups; g->name; g++) {
		if (strcmp(g->name, group))
			continue;
		std::string ids = g->ids;
		size_t at = 0;
		while (at < ids.size()) {
			size_t end = ids.find(' ', at);
			if (end == std::string::npos)
				end = ids.size();
			report(ids.substr(at, end - at).c_str(), why, V_NEEDS_GPU);
			at = end + 1;
		}
	}
	return 0;
}

/* ---- E2: attributes ---- */

static void check_e2(void)
{
	CUdevice dev;
	char name[256] = "?";
	int major = -1, minor = -1, drv = -1;
	CUresult r = cuDeviceGet(&dev, 0);
	if (r == CUDA_SUCCESS) {
		cuDeviceGetName(name, sizeof(name), dev);
		cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
		cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
	}
	cuDriverGetVersion(&drv);
	report("E2.device", fmt("%s, %d.%d, driver API %d", name, major, minor, drv),
	       HWCHECK_SIMULATED ? V_SIMULATED : r == CUDA_SUCCESS ? V_OK : V_DIFFERS);
	static const struct {
		const char *id;
		int attr, want;
	} a[] = {
		{"E2.86", 86, 0}, {"E2.88", 88, 0}, {"E2.89", 89, 1}, {"E2.91", 91, 1},
		{"E2.99", 99, 1}, {"E2.100", 100, 0}, {"E2.113", 113, 1},
	};
	for (const auto &x : a) {
		int v = -1;
		CUresult e = cuDeviceGetAttribute(&v, (CUdevice_attribute)x.attr, dev);
		if (e != CUDA_SUCCESS)
			report(x.id, cu_name(e), judge(false));
		else
			report(x.id, fmt("%d", v), judge(v == x.want));
	}
}

/* ---- H: a kernel on the program's own file mapping ---- */

static const size_t H_BYTES = 64 * MiB;

/* The verdict of an H check: with HMM the sums must match, without it the
 * kernel must fault. */
static const char *judge_h(bool hmm, const sum_result &r, unsigned long long want)
{
	return judge(hmm ? r.err == cudaSuccess && r.sum == want : r.err == cudaErrorIllegalAddress);
}

static void check_h1(void)
{
	std::string why;
	int fd = scratch_file(H_BYTES, true, 0, why);
	const void *p = fd < 0 ? NULL : map_file(fd, H_BYTES, PROT_READ, why);
	if (!p) {
		report("H1", "setting up: " + why, judge(false));
		return;
	}
	unsigned long long cpu = 0;
	for (size_t i = 0; i < H_BYTES / 8; i++)
		cpu += ((const unsigned long long *)p)[i];
	bool hmm = have_hmm();
	sum_result r = gpu_sum(p, H_BYTES);
	report("H1", describe_sum(r, cpu, H_BYTES) + fmt(" (%s, attribute 88 = %d)", hw_fs_name(fd), hmm),
	       judge_h(hmm, r, cpu));
}

static size_t resident_pages(const void *p, size_t bytes)
{
	size_t n = bytes / PAGE, count = 0;
	unsigned char *vec = (unsigned char *)malloc(n);
	if (!vec || mincore((void *)p, bytes, vec)) {
		free(vec);
		return (size_t)-1;
	}
	for (size_t i = 0; i < n; i++)
		count += vec[i] & 1;
	free(vec);
	return count;
}

static void check_h3(void)
{
	std::string why;
	int fd = scratch_file(H_BYTES, true, 0, why);
	if (fd >= 0 && (fsync(fd) || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))) {
		why = fmt("fsync, POSIX_FADV_DONTNEED: %s", strerror(errno));
		fd = -1;
	}
	const void *p = fd < 0 ? NULL : map_file(fd, H_BYTES, PROT_READ, why);
	if (!p) {
		report("H3", "setting up: " + why, judge(false));
		return;
	}
	size_t before = resident_pages(p, H_BYTES);
	bool hmm = have_hmm();
	unsigned long long want = pattern_sum(H_BYTES / 8);
	sum_result r = gpu_sum(p, H_BYTES);
	size_t after = resident_pages(p, H_BYTES);
	report("H3", describe_sum(r, want, H_BYTES) +
		     fmt("; pages resident before %zu, after %zu of %zu (%s)", before, after, H_BYTES / PAGE,
			 hw_fs_name(fd)),
	       judge_h(hmm, r, want));
}

static void check_h4(void)
{
	std::string why;
	int fd = scratch_file(H_BYTES, true, 0, why);
	const void *p = fd < 0 ? NULL : map_file(fd, H_BYTES, PROT_READ, why);
	if (!p) {
		report("H4", "setting up: " + why, judge(false));
		return;
	}
	bool hmm = have_hmm();
	CUmemLocation loc;
	memset(&loc, 0, sizeof(loc));
	loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
	loc.id = 0;
	CUresult pr = cuMemPrefetchAsync((CUdeviceptr)(uintptr_t)p, H_BYTES, loc, 0, 0);
	CUresult ps = pr == CUDA_SUCCESS ? cuCtxSynchronize() : CUDA_SUCCESS;
	/* a refused prefetch leaves a sticky error in the runtime: clear it */
	(void)cudaGetLastError();
	unsigned long long want = pattern_sum(H_BYTES / 8);
	sum_result r = gpu_sum(p, H_BYTES);
	std::string o = "prefetch " + cu_name(pr) + (ps != CUDA_SUCCESS ? ", its sync " + cu_name(ps) : "") +
			"; kernel: " + describe_sum(r, want, H_BYTES);
	report("H4", o, judge(hmm ? pr == CUDA_SUCCESS && r.err == cudaSuccess && r.sum == want
				  : r.err == cudaErrorIllegalAddress));
}

static void check_h5(bool atomic)
{
	const char *id = atomic ? "H5.atomic" : "H5.store";
	std::string why;
	const size_t bytes = 16 * PAGE;
	int fd = scratch_file(bytes, false, 0, why);
	unsigned char *p = fd < 0 ? NULL : (unsigned char *)map_file(fd, bytes, PROT_READ | PROT_WRITE, why);
	if (!p) {
		report(id, "setting up: " + why, judge(false));
		return;
	}
	bool hmm = have_hmm();
	if (atomic)
		SIMGPU_LAUNCH(hw_atomic_pages, 1, 32, 0, 0)((unsigned *)p, 3u, 7u, 11u);
	else
		SIMGPU_LAUNCH(hw_store_pages, 1, 32, 0, 0)(p, 3u, 7u, 11u, (unsigned char)0x5a);
	cudaError_t e = cudaGetLastError();
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	if (atomic) {
		report(id, rt_name(e), judge(e == cudaErrorIllegalAddress));
		return;
	}
	unsigned char got[3] = {0, 0, 0};
	const unsigned pages[3] = {3, 7, 11};
	for (int i = 0; i < 3; i++)
		if (pread(fd, &got[i], 1, (off_t)(pages[i] * PAGE)) != 1)
			got[i] = 0xff;
	bool seen = got[0] == 0x5a && got[1] == 0x5a && got[2] == 0x5a;
	report(id, fmt("%s; pread of pages 3, 7, 11: %#x %#x %#x", rt_name(e).c_str(), got[0], got[1], got[2]),
	       judge(hmm ? e == cudaSuccess && seen : e == cudaErrorIllegalAddress));
}

/* ---- Z: cuMemHostRegister on file mappings ---- */

static void check_z(void)
{
	const size_t bytes = 64 * MiB;
	std::string why;
	int fd = scratch_file(bytes, false, 0x11, why);
	unsigned char *p = fd < 0 ? NULL : (unsigned char *)map_file(fd, bytes, PROT_READ | PROT_WRITE, why);
	if (!p) {
		for (const char *id : {"Z1.rw", "Z1.ro", "Z2.ptr", "Z2.read"})
			report(id, "setting up: " + why, judge(false));
		return;
	}
	const char *fs = hw_fs_name(fd);
	CUresult rw = cuMemHostRegister(p, bytes, CU_MEMHOSTREGISTER_DEVICEMAP);
	if (rw == CUDA_SUCCESS)
		cuMemHostUnregister(p);
	(void)cudaGetLastError();
	bool tmpfs = !strcmp(fs, "tmpfs");
	report("Z1.rw", cu_name(rw) + fmt(" (%s)", fs),
	       judge(tmpfs ? rw == CUDA_SUCCESS : rw == CUDA_ERROR_INVALID_VALUE));

	CUresult ro = cuMemHostRegister(p, bytes, CU_MEMHOSTREGISTER_READ_ONLY | CU_MEMHOSTREGISTER_DEVICEMAP);
	report("Z1.ro", cu_name(ro), judge(ro == CUDA_SUCCESS));
	if (ro != CUDA_SUCCESS) {
		report("Z2.ptr", "not run: the read-only registration failed", judge(false));
		report("Z2.read", "not run: the read-only registration failed", judge(false));
		return;
	}
	CUdeviceptr dp = 0;
	CUresult r = cuMemHostGetDevicePointer(&dp, p, 0);
	if (r != CUDA_SUCCESS)
		report("Z2.ptr", cu_name(r), judge(false));
	else if (dp == (CUdeviceptr)(uintptr_t)p)
		report("Z2.ptr", fmt("the host pointer (%p)", (void *)p), judge(true));
	else
		report("Z2.ptr", fmt("%#llx for host %p", (unsigned long long)dp, (void *)p), judge(false));
	if (r != CUDA_SUCCESS)
		dp = (CUdeviceptr)(uintptr_t)p;

	/* last: on the simulated GPU (and wherever the registration does not
	 * reach the GPU) this kernel faults and the context is gone */
	const size_t at = 5 * PAGE + 17;
	p[at] = 0x5a;
	unsigned char *d_out = NULL, got = 0;
	cudaError_t e = cudaMalloc((void **)&d_out, 1);
	if (e == cudaSuccess) {
		SIMGPU_LAUNCH(hw_copy, 1, 1, 0, 0)((const unsigned char *)(uintptr_t)(dp + at), d_out, 1ull);
		e = cudaGetLastError();
	}
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	if (e == cudaSuccess)
		e = cudaMemcpy(&got, d_out, 1, cudaMemcpyDeviceToHost);
	if (e != cudaSuccess)
		report("Z2.read", rt_name(e), judge(false));
	else
		report("Z2.read", fmt("the kernel read %#x (the CPU stored 0x5a over 0x11)", got), judge(got == 0x5a));
	cuMemHostUnregister(p);
}

/* "VmLck:  0 kB, VmPin: 262144 kB" from /proc/self/status. */
static std::string locked_memory(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return "no /proc/self/status";
	std::string out;
	char line[256];
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "VmLck:", 6) && strncmp(line, "VmPin:", 6))
			continue;
		line[strcspn(line, "\n")] = 0;
		std::string l = line;
		size_t sp = l.find_first_not_of(" \t", 6);
		out += (out.empty() ? "" : ", ") + l.substr(0, 6) + " " + (sp == std::string::npos ? "" : l.substr(sp));
	}
	fclose(f);
	return out;
}

static void check_z4(void)
{
	const size_t bytes = 256 * MiB;
	std::string why;
	int fd = scratch_file(bytes, false, 0x22, why);
	void *p = fd < 0 ? NULL : map_file(fd, bytes, PROT_READ | PROT_WRITE, why);
	if (!p) {
		report("Z4", "setting up: " + why, judge(false));
		return;
	}
	double t0 = now_s();
	CUresult r = cuMemHostRegister(p, bytes, CU_MEMHOSTREGISTER_READ_ONLY | CU_MEMHOSTREGISTER_DEVICEMAP);
	double secs = now_s() - t0;
	if (r != CUDA_SUCCESS) {
		report("Z4", cu_name(r) + fmt(" (%s)", hw_fs_name(fd)), judge(false));
		return;
	}
	std::string locked = locked_memory();
	cuMemHostUnregister(p);
	report("Z4", fmt("%.3f s, %.2f GB/s (%s); while registered: %s", secs, bytes / secs / 1e9, hw_fs_name(fd),
			 locked.c_str()),
	       judge(true));
}

/* ---- userfaultfd ---- */

/* A userfaultfd; as the shim does (shim/tracker.c), user-mode faults only
 * when an unprivileged process may not have kernel-mode ones. */
static int uffd_open(std::string &why)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 && errno == EPERM)
		fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd < 0)
		why = fmt("userfaultfd: %s", strerror(errno));
	return fd;
}

static bool uffd_api(int fd, unsigned long long features, std::string &why)
{
	struct uffdio_api api;
	memset(&api, 0, sizeof(api));
	api.api = UFFD_API;
	api.features = features;
	if (ioctl(fd, UFFDIO_API, &api)) {
		why = fmt("UFFDIO_API (features %#llx): %s", features, strerror(errno));
		return false;
	}
	return true;
}

/* UFFDIO_REGISTER in `mode`: 0, else the errno; unregistered again at once. */
static int uffd_try_register(int fd, void *p, size_t bytes, unsigned long long mode)
{
	struct uffdio_register reg;
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (uintptr_t)p;
	reg.range.len = bytes;
	reg.mode = mode;
	if (ioctl(fd, UFFDIO_REGISTER, &reg))
		return errno;
	struct uffdio_range range = reg.range;
	ioctl(fd, UFFDIO_UNREGISTER, &range);
	return 0;
}

/* PAGEMAP_SCAN for pages written since they were last protected: their
 * number, or -errno. With `protect`, every page is write-protected again
 * (PM_SCAN_WP_MATCHING), the way the shim arms and collects a range. */
static long scan_written(int pagemap, uintptr_t start, uintptr_t end, bool protect)
{
	static struct page_region vec[512];
	struct pm_scan_arg a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.flags = protect ? PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC : 0;
	a.start = start;
	a.end = end;
	a.vec = (uintptr_t)vec;
	a.vec_len = sizeof(vec) / sizeof(vec[0]);
	a.category_mask = PAGE_IS_WRITTEN;
	a.return_mask = PAGE_IS_WRITTEN;
	long n = ioctl(pagemap, PAGEMAP_SCAN, &a);
	if (n < 0)
		return -errno;
	long pages = 0;
	for (long i = 0; i < n; i++)
		pages += (long)((vec[i].end - vec[i].start) / PAGE);
	return pages;
}

static void check_z5(void)
{
	const size_t bytes = 256 * PAGE;
	std::string why;
	int fd = scratch_file(bytes, false, 0x33, why);
	unsigned char *p = fd < 0 ? NULL : (unsigned char *)map_file(fd, bytes, PROT_READ | PROT_WRITE, why);
	int uffd = p ? uffd_open(why) : -1;
	int pagemap = uffd >= 0 ? open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC) : -1;
	if (uffd >= 0 && pagemap < 0)
		why = fmt("/proc/self/pagemap: %s", strerror(errno));
	if (pagemap < 0 || !uffd_api(uffd, UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED, why)) {
		report("Z5", "setting up: " + why, judge(false));
		return;
	}
	volatile unsigned char sink = 0;
	for (size_t i = 0; i < bytes; i += PAGE)
		sink = sink + p[i];
	struct uffdio_register reg;
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (uintptr_t)p;
	reg.range.len = bytes;
	reg.mode = UFFDIO_REGISTER_MODE_WP;
	if (ioctl(uffd, UFFDIO_REGISTER, &reg)) {
		report("Z5", fmt("UFFDIO_REGISTER (WP) on the file mapping: %s", strerror(errno)), judge(false));
		return;
	}
	uintptr_t s = (uintptr_t)p, e = s + bytes;
	long armed = scan_written(pagemap, s, e, true);
	CUresult r = cuMemHostRegister(p, bytes, CU_MEMHOSTREGISTER_READ_ONLY | CU_MEMHOSTREGISTER_DEVICEMAP);
	long after_register = scan_written(pagemap, s, e, false);
	for (unsigned i = 0; i < 17; i++)
		p[i * 13 * PAGE + i] = 0x44;
	long written = scan_written(pagemap, s, e, false);
	if (r == CUDA_SUCCESS)
		cuMemHostUnregister(p);
	if (armed < 0 || after_register < 0 || written < 0) {
		report("Z5", fmt("PAGEMAP_SCAN: %s", strerror((int)-(armed < 0 ? armed : written < 0 ? written
										    : after_register))),
		       judge(false));
		return;
	}
	report("Z5", fmt("%ld written pages; %ld right after the registration (%s, %s)", written, after_register,
			 cu_name(r).c_str(), hw_fs_name(fd)),
	       judge(r == CUDA_SUCCESS && written == 17 && after_register == 0));
}

/* ---- M: managed memory ---- */

static std::string errno_text(int err)
{
	return err ? fmt("%s (%s)", strerrorname_np(err), strerror(err)) : std::string("registered (unregistered again)");
}

static void check_m1(void)
{
	const size_t bytes = 2 * MiB;
	CUdeviceptr dp = 0;
	std::string why;
	CUresult r = cuMemAllocManaged(&dp, bytes, CU_MEM_ATTACH_GLOBAL);
	int uffd = r == CUDA_SUCCESS ? uffd_open(why) : -1;
	if (r != CUDA_SUCCESS)
		why = "cuMemAllocManaged: " + cu_name(r);
	if (uffd < 0 || !uffd_api(uffd, 0, why)) {
		report("M1.missing", "setting up: " + why, judge(false));
		report("M1.wp", "setting up: " + why, judge(false));
		return;
	}
	int missing = uffd_try_register(uffd, (void *)(uintptr_t)dp, bytes, UFFDIO_REGISTER_MODE_MISSING);
	report("M1.missing", errno_text(missing), judge(missing == EINVAL));
	int wp = uffd_try_register(uffd, (void *)(uintptr_t)dp, bytes, UFFDIO_REGISTER_MODE_WP);
	report("M1.wp", errno_text(wp), judge(wp == EINVAL));
	close(uffd);
	cuMemFree(dp);
}

/* CPU writes all of it, then one kernel reads a byte every `stride`. */
static void m2_pass(const char *id, unsigned char *p, size_t bytes, size_t stride, unsigned long long *d_out)
{
	memset(p, 1, bytes);
	unsigned long long count = bytes / stride, got = 0;
	cudaError_t e = cudaMemset(d_out, 0, sizeof(*d_out));
	double t0 = now_s();
	if (e == cudaSuccess) {
		SIMGPU_LAUNCH(hw_touch, (unsigned)((count + 255) / 256), 256, 0, 0)(p, (unsigned long long)stride,
										     count, d_out);
		e = cudaGetLastError();
	}
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	double secs = now_s() - t0;
	if (e == cudaSuccess)
		e = cudaMemcpy(&got, d_out, sizeof(got), cudaMemcpyDeviceToHost);
	if (e != cudaSuccess)
		report(id, rt_name(e), judge(false));
	else
		report(id, fmt("%llu touches in %.2f ms: %.2f us each, %.2f GB/s over the %zu MiB%s", count,
			       secs * 1e3, secs * 1e6 / (double)count, bytes / secs / 1e9, bytes / MiB,
			       got == count ? "" : "; WRONG sum"),
		       judge(got == count));
}

static void check_m2(void)
{
	const size_t bytes = 256 * MiB;
	unsigned char *p = NULL;
	unsigned long long *d_out = NULL;
	cudaError_t e = cudaMallocManaged((void **)&p, bytes, cudaMemAttachGlobal);
	if (e == cudaSuccess)
		e = cudaMalloc((void **)&d_out, sizeof(*d_out));
	if (e != cudaSuccess) {
		report("M2.4k", "setting up: " + rt_name(e), judge(false));
		report("M2.2m", "setting up: " + rt_name(e), judge(false));
		return;
	}
	m2_pass("M2.4k", p, bytes, 4 * 1024, d_out);
	m2_pass("M2.2m", p, bytes, 2 * MiB, d_out);
	cudaFree(p);
	cudaFree(d_out);
}

/* ---- I: interception identities ---- */

static void identity(void *lib, const char *id, const char *name, const char *dlname)
{
	void *gp = NULL;
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	CUresult r = cuGetProcAddress(name, &gp, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st);
	void *dp = lib ? dlsym(lib, dlname) : NULL;
	if (r == CUDA_SUCCESS && gp && gp == dp)
		report(id, fmt("the same pointer (%p)", gp), judge(true));
	else
		report(id, fmt("cuGetProcAddress: %p (%s, status %d); dlsym %s: %p", gp, cu_name(r).c_str(), (int)st,
			       dlname, dp),
		       judge(false));
}

/* "CUDA_SUCCESS 0+8 8+8 16+8" for parameters 0..2, or the first error. */
template <typename H, typename F> static std::string param_info(F fn, H h, CUresult *first)
{
	std::string out;
	*first = CUDA_SUCCESS;
	for (size_t i = 0; i < 3; i++) {
		size_t off = 0, size = 0;
		CUresult r = fn(h, i, &off, &size);
		if (r != CUDA_SUCCESS) {
			*first = r;
			return cu_name(r) + (i ? fmt(" at parameter %zu", i) : std::string());
		}
		out += fmt(" %zu+%zu", off, size);
	}
	return "CUDA_SUCCESS" + out;
}

static void check_i(void)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!lib)
		lib = dlopen("libcuda.so.1", RTLD_NOW);
	identity(lib, "I1.cuLaunchKernel", "cuLaunchKernel", "cuLaunchKernel");
	identity(lib, "I1.cuCtxSynchronize", "cuCtxSynchronize", "cuCtxSynchronize_v2");
	identity(lib, "I1.cuMemcpyHtoD", "cuMemcpyHtoD", "cuMemcpyHtoD_v2");

	cudaFunction_t f = NULL;
	cudaKernel_t k = NULL;
	cudaError_t ef = cudaGetFuncBySymbol(&f, (const void *)hw_sum);
	cudaError_t ek = cudaGetKernel(&k, (const void *)hw_sum);
	auto func_info = [](CUfunction h, size_t i, size_t *o, size_t *s) { return cuFuncGetParamInfo(h, i, o, s); };
	auto kern_info = [](CUkernel h, size_t i, size_t *o, size_t *s) { return cuKernelGetParamInfo(h, i, o, s); };
	const std::string good = "CUDA_SUCCESS 0+8 8+8 16+8";
	CUresult first;
	size_t off, size;
	if (ef != cudaSuccess) {
		for (const char *id : {"I2.func(CUfunction)", "I2.kernel(CUfunction)", "I2.func.past-last"})
			report(id, "cudaGetFuncBySymbol: " + rt_name(ef), judge(false));
	} else {
		std::string o = param_info(func_info, (CUfunction)f, &first);
		report("I2.func(CUfunction)", o, judge(o == good));
		o = param_info(kern_info, (CUkernel)(void *)f, &first);
		report("I2.kernel(CUfunction)", o, judge(true));
		CUresult r = cuFuncGetParamInfo((CUfunction)f, 3, &off, &size);
		report("I2.func.past-last", cu_name(r), judge(r == CUDA_ERROR_INVALID_VALUE));
	}
	if (ek != cudaSuccess) {
		for (const char *id : {"I2.func(CUkernel)", "I2.kernel(CUkernel)", "I2.kernel.past-last"})
			report(id, "cudaGetKernel: " + rt_name(ek), judge(false));
	} else {
		std::string o = param_info(func_info, (CUfunction)(void *)k, &first);
		report("I2.func(CUkernel)", o, judge(first == CUDA_ERROR_INVALID_HANDLE));
		o = param_info(kern_info, (CUkernel)k, &first);
		report("I2.kernel(CUkernel)", o, judge(o == good));
		CUresult r = cuKernelGetParamInfo((CUkernel)k, 3, &off, &size);
		report("I2.kernel.past-last", cu_name(r), judge(r == CUDA_ERROR_INVALID_VALUE));
	}
}

/* ---- V: virtual address reservations ---- */

static const uintptr_t CHUNK32 = 32 * MiB;

/* A free address aligned to 32 MiB with room for `bytes` after it: found
 * by reserving more and giving it back (nothing is mapped there after). */
static uintptr_t free_area(size_t bytes)
{
	size_t len = bytes + 2 * CHUNK32;
	void *m = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return 0;
	munmap(m, len);
	return ((uintptr_t)m + CHUNK32 - 1) & ~(CHUNK32 - 1);
}

static void hint(const char *id, size_t bytes, bool only_2m, bool want_honoured)
{
	uintptr_t a = free_area(bytes + 2 * MiB);
	if (only_2m)
		a += 2 * MiB;
	CUdeviceptr got = 0;
	CUresult r = cuMemAddressReserve(&got, bytes, 0, (CUdeviceptr)a, 0);
	if (r != CUDA_SUCCESS) {
		report(id, cu_name(r), judge(false));
		return;
	}
	uintptr_t next = (a + CHUNK32 - 1) & ~(CHUNK32 - 1);
	std::string o;
	if (got == a)
		o = "honoured";
	else if (got == next)
		o = fmt("moved up to the next 32 MiB boundary (+%lu MiB)", (unsigned long)((next - a) / MiB));
	else
		o = fmt("not honoured: %#llx for %#lx", (unsigned long long)got, (unsigned long)a);
	cuMemAddressFree(got, bytes);
	bool ok = want_honoured ? got == a : only_2m && bytes >= CHUNK32 ? got == next : got != a;
	report(id, o, judge(ok));
}

static void check_v1(void)
{
	hint("V1.2M@32M", 2 * MiB, false, false);
	hint("V1.32M@32M", 32 * MiB, false, true);
	hint("V1.2M@2M", 2 * MiB, true, false);
	hint("V1.32M@2M", 32 * MiB, true, false);
}

/* Device memory mapped at a reserved range of 32 MiB (at a free 32 MiB-
 * aligned hint, else where the driver puts it), its first granule mapped
 * and accessible, a 0xaa-filled file laid MAP_FIXED over the granule's host
 * side. The steps that failed go to `why`. */
struct overlay {
	CUdeviceptr base;
	size_t reserved, mapped; /* mapped 0: one granule */
	CUmemGenericAllocationHandle h;
	int fd;
	std::string why;
};

static bool overlay_make(overlay &v)
{
	size_t want = v.mapped;
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	CUresult r = cuMemGetAllocationGranularity(&v.mapped, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (r != CUDA_SUCCESS) {
		v.why = "cuMemGetAllocationGranularity: " + cu_name(r);
		return false;
	}
	if (want)
		v.mapped = (want + v.mapped - 1) / v.mapped * v.mapped;
	if ((r = cuMemAddressReserve(&v.base, v.reserved, 0, (CUdeviceptr)free_area(v.reserved), 0)) != CUDA_SUCCESS) {
		v.why = "cuMemAddressReserve: " + cu_name(r);
		return false;
	}
	if ((r = cuMemCreate(&v.h, v.mapped, &prop, 0)) != CUDA_SUCCESS) {
		v.why = "cuMemCreate: " + cu_name(r);
		return false;
	}
	if ((r = cuMemMap(v.base, v.mapped, 0, v.h, 0)) != CUDA_SUCCESS) {
		v.why = "cuMemMap: " + cu_name(r);
		return false;
	}
	CUmemAccessDesc ad;
	memset(&ad, 0, sizeof(ad));
	ad.location = prop.location;
	ad.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	if ((r = cuMemSetAccess(v.base, v.mapped, &ad, 1)) != CUDA_SUCCESS) {
		v.why = "cuMemSetAccess: " + cu_name(r);
		return false;
	}
	if ((v.fd = scratch_file(v.mapped, false, 0xaa, v.why)) < 0)
		return false;
	void *m = mmap((void *)(uintptr_t)v.base, v.mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, v.fd, 0);
	if (m == MAP_FAILED) {
		v.why = fmt("mmap MAP_FIXED over the range: %s", strerror(errno));
		return false;
	}
	return true;
}

/* What /proc/self/maps has at addr: "rw-s /tmp/x (deleted)", "---p
 * anonymous", or "nothing mapped" (reading the address itself could fault). */
static std::string maps_entry(uintptr_t addr)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return "no /proc/self/maps";
	char line[512];
	std::string out = "nothing mapped";
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8] = "";
		int path_at = 0;
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &path_at) < 3 || addr < lo || addr >= hi)
			continue;
		std::string path = path_at > 0 ? line + path_at : "";
		path = path.substr(0, path.find('\n'));
		out = std::string(perms) + " " + (path.empty() ? "anonymous" : path);
		break;
	}
	fclose(f);
	return out;
}

/* cuMemUnmap, cuMemRelease, cuMemAddressFree; the last one's result. */
static CUresult overlay_free(overlay &v, std::string &o)
{
	CUresult u = cuMemUnmap(v.base, v.mapped);
	CUresult rel = cuMemRelease(v.h);
	CUresult f = cuMemAddressFree(v.base, v.reserved);
	o = "cuMemAddressFree " + cu_name(f) + " (cuMemUnmap " + cu_name(u) + ", cuMemRelease " + cu_name(rel) + ")";
	return f;
}

static void check_v2(void)
{
	overlay v = {};
	v.reserved = CHUNK32;
	if (!overlay_make(v)) {
		report("V2", "setting up: " + v.why, judge(false));
		report("V3.b", "not run: V2 was not set up", judge(false));
		return;
	}
	unsigned char *base = (unsigned char *)(uintptr_t)v.base, *d_out = NULL;
	unsigned char dev = 0, file = 0;
	cudaError_t e = cudaMalloc((void **)&d_out, 256);
	if (e == cudaSuccess) {
		SIMGPU_LAUNCH(hw_fill, 1, 256, 0, 0)(base, 256ull, (unsigned char)0x55);
		e = cudaGetLastError();
	}
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	if (e == cudaSuccess) {
		SIMGPU_LAUNCH(hw_copy, 1, 256, 0, 0)((const unsigned char *)base, d_out, 256ull);
		e = cudaGetLastError();
	}
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	if (e == cudaSuccess)
		e = cudaMemcpy(&dev, d_out, 1, cudaMemcpyDeviceToHost);
	if (pread(v.fd, &file, 1, 0) != 1)
		file = 0;
	if (e != cudaSuccess)
		report("V2", rt_name(e), judge(false));
	else
		report("V2", fmt("the device sees %#x, the host mapping %#x, the file %#x", dev, base[0], file),
		       judge(dev == 0x55 && base[0] == 0xaa && file == 0xaa));

	/* V3 (b): never a hole: PROT_NONE anonymous memory replaces the file */
	void *m = mmap(base, v.mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
	if (m == MAP_FAILED) {
		report("V3.b", fmt("mmap PROT_NONE over the range: %s", strerror(errno)), judge(false));
		return;
	}
	std::string o;
	CUresult f = overlay_free(v, o);
	report("V3.b", o, judge(f == CUDA_SUCCESS));
}

/* V3 (a): the file still laid over the mapped part at cuMemAddressFree;
 * (c): the same, cuMemAddressFree called before cuMemUnmap. On the H200
 * (a) succeeds and takes the file mapping with it, leaving nothing mapped
 * there; only (c) is refused. (An earlier probe reported (a) refused: it
 * made the three calls as arguments of one printf, whose order of
 * evaluation C leaves open, and so freed first.) */
static void check_v3(void)
{
	for (const char *id : {"V3.a", "V3.c"}) {
		overlay v = {};
		v.reserved = CHUNK32;
		if (!overlay_make(v)) {
			report(id, "setting up: " + v.why, judge(false));
			continue;
		}
		std::string o;
		if (!strcmp(id, "V3.c")) {
			CUresult early = cuMemAddressFree(v.base, v.reserved);
			CUresult f = overlay_free(v, o);
			report(id, "cuMemAddressFree while mapped " + cu_name(early) + "; then " + o,
			       judge(early == CUDA_ERROR_INVALID_VALUE && f == CUDA_SUCCESS));
			continue;
		}
		CUresult f = overlay_free(v, o);
		std::string host = maps_entry(v.base);
		report(id, o + "; the host side then: " + host, judge(f == CUDA_SUCCESS && host == "nothing mapped"));
	}
}

/* A managed buffer larger than what the device has free, filled by DMA
 * (`dma`: the way the shim uploads a paged replica) or by the CPU and a
 * prefetch, then summed by a kernel. Each in a child of its own: a
 * context may not survive it. */
static void check_m5(const char *id, size_t spare, bool dma)
{
	const size_t bytes = 16 * MiB, chunk = 2 * MiB, words = bytes / 8;
	unsigned long long *m = NULL, *d_out = NULL, *stage[2] = {NULL, NULL}, want = 0, got = 0;
	void *big = NULL;
	size_t free_bytes = 0, total = 0;
	cudaStream_t s = NULL;
	cudaEvent_t done[2] = {NULL, NULL};
	cudaError_t e = cudaMallocManaged((void **)&m, bytes, cudaMemAttachGlobal);
	if (e == cudaSuccess)
		e = cudaMalloc((void **)&d_out, sizeof(*d_out));
	for (int b = 0; b < 2 && e == cudaSuccess; b++)
		if ((e = cudaMallocHost((void **)&stage[b], chunk)) == cudaSuccess)
			e = cudaEventCreateWithFlags(&done[b], cudaEventDisableTiming);
	if (e == cudaSuccess)
		e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	if (e == cudaSuccess)
		e = cudaMemGetInfo(&free_bytes, &total);
	if (e == cudaSuccess && free_bytes > spare)
		e = cudaMalloc(&big, free_bytes - spare);
	if (e == cudaSuccess)
		e = cudaMemGetInfo(&free_bytes, &total);
	if (e != cudaSuccess) {
		report(id, "setting up: " + rt_name(e), judge(false));
		return;
	}
	const char *where = "the fill";
	for (size_t i = 0; i < words; i++)
		want += i * 2654435761ull;
	if (dma) {
		bool pending[2] = {false, false};
		for (size_t off = 0, b = 0; off < bytes && e == cudaSuccess; off += chunk, b ^= 1) {
			if (pending[b] && (e = cudaEventSynchronize(done[b])) != cudaSuccess)
				break;
			for (size_t i = 0; i < chunk / 8; i++)
				stage[b][i] = (off / 8 + i) * 2654435761ull;
			if ((e = cudaMemcpyAsync((char *)m + off, stage[b], chunk, cudaMemcpyHostToDevice, s)) ==
			    cudaSuccess)
				e = cudaEventRecord(done[b], s);
			pending[b] = true;
		}
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(s);
	} else {
		for (size_t i = 0; i < words; i++)
			m[i] = i * 2654435761ull;
		cudaMemLocation dev;
		memset(&dev, 0, sizeof(dev));
		dev.type = cudaMemLocationTypeDevice;
		where = "the prefetch";
		if ((e = cudaMemPrefetchAsync(m, bytes, dev, 0, s)) == cudaSuccess)
			e = cudaStreamSynchronize(s);
	}
	if (e == cudaSuccess) {
		where = "the kernel";
		if ((e = cudaMemset(d_out, 0, sizeof(*d_out))) == cudaSuccess) {
			SIMGPU_LAUNCH(hw_sum, 64, 256, 0, 0)(m, (unsigned long long)words, d_out);
			e = cudaGetLastError();
		}
		if (e == cudaSuccess)
			e = cudaDeviceSynchronize();
		if (e == cudaSuccess)
			e = cudaMemcpy(&got, d_out, sizeof(got), cudaMemcpyDeviceToHost);
	}
	if (e != cudaSuccess)
		report(id, fmt("%s at %s (%zu MiB free)", rt_name(e).c_str(), where, free_bytes / MiB), judge(false));
	else
		report(id, fmt("the sums %s (%zu MiB free)", got == want ? "match" : "DIFFER", free_bytes / MiB),
		       judge(got == want));
}

/* ---- the child's entry ---- */

int hw_run_child(const char *group)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	bool known = false;
	for (const struct hw_group *g = hw_groups; g->name; g++)
		known |= !strcmp(g->name, group);
	if (!known) {
		fprintf(stderr, "gaia-hwcheck: no check group %s\n", group);
		return 2;
	}
	std::string why;
	if (!gpu_init(why))
		return no_gpu(group, why);
	const std::string g = group;
	if (g == "E2")
		check_e2();
	else if (g == "H1")
		check_h1();
	else if (g == "H3")
		check_h3();
	else if (g == "H4")
		check_h4();
	else if (g == "H5s")
		check_h5(false);
	else if (g == "H5a")
		check_h5(true);
	else if (g == "Z")
		check_z();
	else if (g == "Z4")
		check_z4();
	else if (g == "Z5")
		check_z5();
	else if (g == "M1")
		check_m1();
	else if (g == "M2")
		check_m2();
	else if (g == "M5d")
		check_m5("M5.dma", 8 * MiB, true);
	else if (g == "M5c")
		check_m5("M5.cpu", 8 * MiB, false);
	else if (g == "M5f")
		check_m5("M5.fit", 64 * MiB, true);
	else if (g == "I")
		check_i();
	else if (g == "V1")
		check_v1();
	else if (g == "V2")
		check_v2();
	else if (g == "V3")
		check_v3();
	return 0;
}
