/*
 * test_hostmem.cpp — host memory kernels can use, at its own address:
 * cuMemHostAlloc memory, registered anonymous memory and registered
 * MAP_SHARED file mappings (a kernel sees the page cache), read-only
 * registrations (a store is a sticky illegal address), the refusal of a
 * writable registration of a file whose file system tracks dirty pages,
 * and the bus charge of every page a kernel touches.
 *
 * Cases that poison the context run in a child (this program with
 * --child NAME).
 */
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run_self.h"
#include "test_util.h"
#include "kernels.h"
#include "simgpu.h"

static CUfunction fn(const void *k) { return (CUfunction)k; }
static const size_t PAGE = 4096;

static simgpu_stats stats(void)
{
    simgpu_stats s;
    assert_int_equal(simgpu_stats_get(0, &s), 0);
    return s;
}

static uint64_t access_bytes(const simgpu_stats &s, int dir) { return s.bus_bytes[dir][SIMGPU_BUS_HOST_ACCESS]; }

static void launch_add_one(int *p, int n)
{
    void *args[] = { &p, &n };
    CU_OK(cuLaunchKernel(fn((const void *)add_one), (unsigned)(n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
}

static unsigned long long launch_sum(const int *p, int n)
{
    unsigned long long *sum;
    CU_OK(cuMemAllocHost((void **)&sum, sizeof(*sum)));
    *sum = 0;
    void *args[] = { &p, &n, &sum };
    CU_OK(cuLaunchKernel(fn((const void *)sum_ints), (unsigned)(n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CU_OK(cuCtxSynchronize());
    unsigned long long v = *sum;
    CU_OK(cuMemFreeHost(sum));
    return v;
}

static void test_attributes_say_host_pointers_are_device_pointers(void **)
{
    int v = 0;
    CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 0));
    assert_int_equal(v, 1);
    CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, 0));
    assert_int_equal(v, 1);
    CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 0));
    assert_int_equal(v, 1);
    CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 0));
    assert_int_equal(v, 1);
}

/* Zero-copy: kernels read and update pinned memory in place; each kernel
 * pays for the pages it touches: loads host->device, stores device->host
 * (a read-modify-write instruction faults as a store). */
static void test_kernels_read_and_write_host_alloc_memory_and_pay_per_page(void **)
{
    const int n = 64 * 1024;                  /* 256 KiB: 64 pages */
    const uint64_t bytes = (uint64_t)n * sizeof(int);
    int *h;
    CU_OK(cuMemHostAlloc((void **)&h, bytes, CU_MEMHOSTALLOC_DEVICEMAP));
    CUdeviceptr dp;
    CU_OK(cuMemHostGetDevicePointer(&dp, h, 0));
    assert_int_equal(dp, (CUdeviceptr)(uintptr_t)h);
    unsigned long long want = 0;
    for (int i = 0; i < n; i++) {
        h[i] = i;
        want += (unsigned long long)i;
    }
    simgpu_stats s0 = stats();
    assert_int_equal(launch_sum(h, n), want);
    simgpu_stats s1 = stats();
    /* every page of h once (the sum itself lives in another pinned page) */
    assert_true(access_bytes(s1, SIMGPU_BUS_HTOD) - access_bytes(s0, SIMGPU_BUS_HTOD) >= bytes);
    assert_true(access_bytes(s1, SIMGPU_BUS_HTOD) - access_bytes(s0, SIMGPU_BUS_HTOD) <= bytes + PAGE);
    assert_int_equal(s1.bus_transfers[SIMGPU_BUS_HTOD][SIMGPU_BUS_HOST_ACCESS] -
                         s0.bus_transfers[SIMGPU_BUS_HTOD][SIMGPU_BUS_HOST_ACCESS],
                     access_bytes(s1, SIMGPU_BUS_HTOD) / PAGE - access_bytes(s0, SIMGPU_BUS_HTOD) / PAGE);
    /* the next kernel pays again */
    assert_int_equal(launch_sum(h, n), want);
    simgpu_stats s2 = stats();
    assert_true(access_bytes(s2, SIMGPU_BUS_HTOD) - access_bytes(s1, SIMGPU_BUS_HTOD) >= bytes);

    launch_add_one(h, n);
    CU_OK(cuCtxSynchronize());
    simgpu_stats s3 = stats();
    for (int i = 0; i < n; i++)
        assert_int_equal(h[i], i + 1);
    assert_int_equal(access_bytes(s3, SIMGPU_BUS_DTOH) - access_bytes(s2, SIMGPU_BUS_DTOH), bytes);
    /* the CPU's stores between launches reach the next kernel */
    for (int i = 0; i < n; i++)
        h[i] = 2 * i;
    launch_add_one(h, n);
    CU_OK(cuCtxSynchronize());
    for (int i = 0; i < n; i++)
        assert_int_equal(h[i], 2 * i + 1);
    CU_OK(cuMemFreeHost(h));
}

/* Live: a kernel polling a flag in pinned memory sees the CPU set it while
 * the kernel runs. */
static void test_a_running_kernel_sees_the_cpu_store(void **)
{
    int *flag, *seen;
    CU_OK(cuMemHostAlloc((void **)&flag, sizeof(int), CU_MEMHOSTALLOC_DEVICEMAP));
    CU_OK(cuMemHostAlloc((void **)&seen, sizeof(int), CU_MEMHOSTALLOC_DEVICEMAP));
    *flag = 0;
    *seen = -1;
    long long ns = 5LL * 1000 * 1000 * 1000;
    void *args[] = { &flag, &seen, &ns };
    CU_OK(cuLaunchKernel(fn((const void *)wait_flag), 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    usleep(50 * 1000);
    assert_int_equal(cuStreamQuery(NULL), CUDA_ERROR_NOT_READY);
    __atomic_store_n(flag, 42, __ATOMIC_RELEASE);
    CU_OK(cuCtxSynchronize());
    assert_int_equal(*seen, 42);
    CU_OK(cuMemFreeHost(flag));
    CU_OK(cuMemFreeHost(seen));
}

/* Allocating and registering host memory while kernels keep every worker
 * busy waiting for the host: the calls return (they must not wait for the
 * kernels), then the host releases the kernels. */
static void test_host_memory_calls_do_not_wait_for_busy_kernels(void **)
{
    int workers = 0;
    CU_OK(cuDeviceGetAttribute(&workers, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
    int *flag, *seen;
    CU_OK(cuMemHostAlloc((void **)&flag, sizeof(int), 0));
    CU_OK(cuMemHostAlloc((void **)&seen, 64 * sizeof(int), 0));
    *flag = 0;
    CUstream s[64];
    long long ns = 3LL * 1000 * 1000 * 1000;
    for (int i = 0; i < workers; i++) {
        CU_OK(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
        int *mine = seen + i;
        void *args[] = { &flag, &mine, &ns };
        CU_OK(cuLaunchKernel(fn((const void *)wait_flag), 1, 1, 1, 1, 1, 1, 0, s[i], args, NULL));
    }
    usleep(50 * 1000);
    double t0 = now_ms();
    int *more;
    CU_OK(cuMemHostAlloc((void **)&more, 4096, 0));
    void *anon = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CU_OK(cuMemHostRegister(anon, 8192, 0));
    double took = now_ms() - t0;
    for (int i = 0; i < workers; i++)
        assert_int_equal(cuStreamQuery(s[i]), CUDA_ERROR_NOT_READY);   /* still waiting for the flag */
    __atomic_store_n(flag, 7, __ATOMIC_RELEASE);
    CU_OK(cuCtxSynchronize());
    printf("# %d busy workers: allocation + registration took %.1f ms\n", workers, took);
    assert_true(took < 1000);
    for (int i = 0; i < workers; i++) {
        assert_int_equal(seen[i], 7);
        CU_OK(cuStreamDestroy(s[i]));
    }
    CU_OK(cuMemHostUnregister(anon));
    munmap(anon, 8192);
    CU_OK(cuMemFreeHost(more));
    CU_OK(cuMemFreeHost(flag));
    CU_OK(cuMemFreeHost(seen));
}

/* Anonymous memory mapped after cuInit, registered: kernels reach it at
 * its own address; after unregistering it is the program's again. */
static void test_registered_anonymous_memory_is_reachable(void **)
{
    const int n = 32 * 1024;
    int *a = (int *)mmap(NULL, n * sizeof(int), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(a != MAP_FAILED);
    for (int i = 0; i < n; i++)
        a[i] = 7 * i;
    CU_OK(cuMemHostRegister(a, n * sizeof(int), CU_MEMHOSTREGISTER_DEVICEMAP));
    CUdeviceptr dp;
    CU_OK(cuMemHostGetDevicePointer(&dp, a, 0));
    assert_int_equal(dp, (CUdeviceptr)(uintptr_t)a);
    launch_add_one(a, n);
    CU_OK(cuCtxSynchronize());
    for (int i = 0; i < n; i++)
        assert_int_equal(a[i], 7 * i + 1);
    CU_OK(cuMemHostUnregister(a));
    for (int i = 0; i < n; i++)
        assert_int_equal(a[i], 7 * i + 1);
    a[5] = -5;          /* still ordinary writable memory */
    assert_int_equal(a[5], -5);
    munmap(a, n * sizeof(int));
}

/* Two registrations that share a page: both reachable, and unregistering
 * one leaves the other working (the shared page stays shared). */
static void test_registrations_sharing_a_page(void **)
{
    unsigned char *base = (unsigned char *)mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                                -1, 0);
    assert_true(base != MAP_FAILED);
    int *a = (int *)base, *b = (int *)(base + 6000);
    const int na = 6000 / 4, nb = 6000 / 4;
    for (int i = 0; i < na; i++)
        a[i] = i;
    for (int i = 0; i < nb; i++)
        b[i] = 10000 + i;
    CU_OK(cuMemHostRegister(a, na * sizeof(int), 0));
    CU_OK(cuMemHostRegister(b, nb * sizeof(int), 0));
    launch_add_one(a, na);
    launch_add_one(b, nb);
    CU_OK(cuCtxSynchronize());
    for (int i = 0; i < na; i++)
        assert_int_equal(a[i], i + 1);
    for (int i = 0; i < nb; i++)
        assert_int_equal(b[i], 10000 + i + 1);
    CU_OK(cuMemHostUnregister(a));
    b[0] = -1;          /* on the shared page: the kernel must see it */
    launch_add_one(b, nb);
    CU_OK(cuCtxSynchronize());
    assert_int_equal(b[0], 0);
    for (int i = 1; i < nb; i++)
        assert_int_equal(b[i], 10000 + i + 2);
    assert_int_equal(a[na - 1], na);
    CU_OK(cuMemHostUnregister(b));
    for (int i = 1; i < nb; i++)
        assert_int_equal(b[i], 10000 + i + 2);
    a[0] = 77;
    assert_int_equal(a[0], 77);
    munmap(base, 3 * PAGE);
}

static std::string scratch_file(const char *dir, const char *name, size_t bytes)
{
    std::string path = std::string(dir) + "/" + name + "." + std::to_string(getpid());
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)bytes), 0);
    close(fd);
    return path;
}

static bool dirty_tracking_fs(const char *path)
{
    struct statfs fs;
    assert_int_equal(statfs(path, &fs), 0);
    struct utsname u;
    unsigned major = 0, minor = 0;
    uname(&u);
    sscanf(u.release, "%u.%u", &major, &minor);
    bool new_kernel = major > 6 || (major == 6 && minor >= 5);
    return new_kernel && fs.f_type != TMPFS_MAGIC && fs.f_type != HUGETLBFS_MAGIC;
}

/* A read-only registration of a shared file mapping: a kernel reads the
 * page cache, including what the CPU wrote (through the mapping or with
 * pwrite) before the launch.  A writable one is refused where the file
 * system tracks dirty pages. */
static void test_registered_file_mapping_shows_the_page_cache(void **)
{
    const char *dir = getenv("SIMGPU_TEST_DIR") ? getenv("SIMGPU_TEST_DIR") : ".";
    const int n = 16 * 1024;
    std::string path = scratch_file(dir, "hostmem-file", n * sizeof(int));
    int fd = open(path.c_str(), O_RDWR);
    assert_true(fd >= 0);
    int *m = (int *)mmap(NULL, n * sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(m != MAP_FAILED);
    unsigned long long want = 0;
    for (int i = 0; i < n; i++) {
        m[i] = i % 1000;
        want += (unsigned long long)(i % 1000);
    }
    CUresult w = cuMemHostRegister(m, n * sizeof(int), CU_MEMHOSTREGISTER_DEVICEMAP);
    if (dirty_tracking_fs(path.c_str()))
        assert_int_equal(w, CUDA_ERROR_INVALID_VALUE);     /* as the H200 answered on ext4 */
    else {
        assert_int_equal(w, CUDA_SUCCESS);
        CU_OK(cuMemHostUnregister(m));
    }
    CU_OK(cuMemHostRegister(m, n * sizeof(int), CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_READ_ONLY));
    assert_int_equal(launch_sum(m, n), want);
    /* CPU changes before the next launch, through the mapping and pwrite */
    m[0] += 1000;
    int v = 5000;
    assert_int_equal(pwrite(fd, &v, sizeof(v), (off_t)(n - 1) * sizeof(int)), (ssize_t)sizeof(v));
    want += 1000 + (unsigned long long)v - (unsigned long long)((n - 1) % 1000);
    assert_int_equal(launch_sum(m, n), want);
    CU_OK(cuMemHostUnregister(m));
    munmap(m, n * sizeof(int));
    close(fd);
    unlink(path.c_str());
}

/* On tmpfs a writable registration works and a kernel's stores reach the
 * file. */
static void test_writable_registration_of_a_tmpfs_file(void **)
{
    struct statfs fs;
    if (statfs("/dev/shm", &fs) != 0 || fs.f_type != TMPFS_MAGIC)
        skip();
    const int n = 8 * 1024;
    std::string path = scratch_file("/dev/shm", "simgpu-hostmem", n * sizeof(int));
    int fd = open(path.c_str(), O_RDWR);
    int *m = (int *)mmap(NULL, n * sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(m != MAP_FAILED);
    for (int i = 0; i < n; i++)
        m[i] = i;
    CU_OK(cuMemHostRegister(m, n * sizeof(int), CU_MEMHOSTREGISTER_DEVICEMAP));
    launch_add_one(m, n);
    CU_OK(cuCtxSynchronize());
    int got[4];
    assert_int_equal(pread(fd, got, sizeof(got), 100 * sizeof(int)), (ssize_t)sizeof(got));
    for (int i = 0; i < 4; i++)
        assert_int_equal(got[i], 100 + i + 1);
    CU_OK(cuMemHostUnregister(m));
    munmap(m, n * sizeof(int));
    close(fd);
    unlink(path.c_str());
}

/* Pinned memory shared with the device process stays private to a child
 * forked from the host. */
static void test_a_forked_child_gets_its_own_copy(void **)
{
    int *h;
    CU_OK(cuMemHostAlloc((void **)&h, PAGE, 0));
    h[0] = 1;
    pid_t pid = fork();
    if (pid == 0) {
        h[0] = 2;
        _exit(h[0] == 2 ? 0 : 1);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(h[0], 1);
    CU_OK(cuMemFreeHost(h));
}

/* ---- children: cases that end the context ---- */

static int child_read_only_store(void)
{
    if (sim_test_setup(NULL))
        return 10;
    int *a = (int *)mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    a[0] = 1;
    if (cuMemHostRegister(a, PAGE, CU_MEMHOSTREGISTER_READ_ONLY))
        return 11;
    int v = 9;
    void *args[] = { &a, &v };
    if (cuLaunchKernel(fn((const void *)store_int), 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL))
        return 12;
    CUresult r = cuCtxSynchronize();
    CUresult again = cuCtxSynchronize();      /* sticky */
    printf("%d %d %d\n", (int)r, (int)again, a[0]);
    return r == CUDA_ERROR_ILLEGAL_ADDRESS && again == CUDA_ERROR_ILLEGAL_ADDRESS && a[0] == 1 ? 0 : 13;
}

static int run_child(const char *name)
{
    return sim_run_self("--child", name, NULL, NULL, 0);
}

static void test_a_store_to_a_read_only_registration_is_an_illegal_address(void **)
{
    assert_int_equal(run_child("read_only_store"), 0);
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "--child")) {
        if (!strcmp(argv[2], "read_only_store"))
            return child_read_only_store();
        return 99;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attributes_say_host_pointers_are_device_pointers),
        cmocka_unit_test(test_kernels_read_and_write_host_alloc_memory_and_pay_per_page),
        cmocka_unit_test(test_a_running_kernel_sees_the_cpu_store),
        cmocka_unit_test(test_host_memory_calls_do_not_wait_for_busy_kernels),
        cmocka_unit_test(test_registered_anonymous_memory_is_reachable),
        cmocka_unit_test(test_registrations_sharing_a_page),
        cmocka_unit_test(test_registered_file_mapping_shows_the_page_cache),
        cmocka_unit_test(test_writable_registration_of_a_tmpfs_file),
        cmocka_unit_test(test_a_forked_child_gets_its_own_copy),
        cmocka_unit_test(test_a_store_to_a_read_only_registration_is_an_illegal_address),
    };
    return cmocka_run_group_tests_name("hostmem", tests, sim_test_setup, NULL);
}
