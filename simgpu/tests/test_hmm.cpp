/*
 * test_hmm.cpp — the HMM profile (SIMGPU_HMM=1): kernels read and write the
 * host's MAP_SHARED file mappings at their own addresses with no
 * registration (writes land in the page cache, every touched page is
 * charged on the bus); a range registered with userfaultfd, and an atomic
 * on a file page, are a sticky illegal address; without the knob a kernel
 * touching a file mapping faults.
 *
 * Cases that end the context run in a child (this program with --child
 * NAME).
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "run_self.h"
#include "test_util.h"
#include "kernels.h"
#include "simgpu.h"

static CUfunction fn(const void *k) { return (CUfunction)k; }
static const int N = 16 * 1024;     /* ints: 64 KiB, 16 pages */

static std::string dir(void)
{
    const char *d = getenv("SIMGPU_TEST_DIR");
    return d ? d : ".";
}

/* A file of N ints i % 1000, mapped shared read-write. */
static int *map_file(const std::string &path, int *fd_out)
{
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, N * sizeof(int)) != 0)
        return NULL;
    int *m = (int *)mmap(NULL, N * sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return NULL;
    for (int i = 0; i < N; i++)
        m[i] = i % 1000;
    *fd_out = fd;
    return m;
}

static unsigned long long sum_on_device(const int *p, int n, CUresult *r)
{
    unsigned long long *sum;
    cuMemAllocHost((void **)&sum, sizeof(*sum));
    *sum = 0;
    void *args[] = { &p, &n, &sum };
    *r = cuLaunchKernel(fn((const void *)sum_ints), (unsigned)(n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
    if (*r == CUDA_SUCCESS)
        *r = cuCtxSynchronize();
    unsigned long long v = *sum;
    cuMemFreeHost(sum);
    return v;
}

static void test_pageable_memory_access_is_reported(void **)
{
    int v = 0;
    CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, 0));
    assert_int_equal(v, 1);
}

/* The kernel reads the page cache through the program's own pointer; the
 * CPU's changes before a launch reach it; its stores reach the file. */
static void test_kernels_read_and_write_a_file_mapping_without_registration(void **)
{
    std::string path = dir() + "/hmm-file." + std::to_string(getpid());
    int fd;
    int *m = map_file(path, &fd);
    assert_non_null(m);
    unsigned long long want = 0;
    for (int i = 0; i < N; i++)
        want += (unsigned long long)(i % 1000);
    simgpu_stats s0;
    simgpu_stats_get(0, &s0);
    CUresult r;
    assert_int_equal(sum_on_device(m, N, &r), want);
    CU_OK(r);
    simgpu_stats s1;
    simgpu_stats_get(0, &s1);
    uint64_t read = s1.bus_bytes[SIMGPU_BUS_HTOD][SIMGPU_BUS_HOST_ACCESS] - s0.bus_bytes[SIMGPU_BUS_HTOD][SIMGPU_BUS_HOST_ACCESS];
    assert_true(read >= N * sizeof(int));

    int v = 4000;
    assert_int_equal(pwrite(fd, &v, sizeof(v), 0), (ssize_t)sizeof(v));
    m[N - 1] = 3000;
    want += 4000 + 3000 - (unsigned long long)((N - 1) % 1000);
    assert_int_equal(sum_on_device(m, N, &r), want);
    CU_OK(r);

    int n = N;
    void *args[] = { &m, &n };
    CU_OK(cuLaunchKernel(fn((const void *)add_one), N / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CU_OK(cuCtxSynchronize());
    int got[2];
    assert_int_equal(pread(fd, got, sizeof(got), 10 * sizeof(int)), (ssize_t)sizeof(got));
    assert_int_equal(got[0], 11);
    assert_int_equal(got[1], 12);
    munmap(m, N * sizeof(int));
    close(fd);
    unlink(path.c_str());
}

/* A new mapping at the address of an old one, between kernels: the next
 * kernel sees the new file. */
static void test_a_remapped_address_shows_the_new_file(void **)
{
    std::string a = dir() + "/hmm-a." + std::to_string(getpid()), b = dir() + "/hmm-b." + std::to_string(getpid());
    int fa, fb;
    int *m = map_file(a, &fa);
    assert_non_null(m);
    CUresult r;
    unsigned long long first = sum_on_device(m, N, &r);
    CU_OK(r);
    int *mb = map_file(b, &fb);
    assert_non_null(mb);
    for (int i = 0; i < N; i++)
        mb[i] = 1;
    munmap(mb, N * sizeof(int));
    assert_true(mmap(m, N * sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fb, 0) == m);
    assert_int_equal(sum_on_device(m, N, &r), (unsigned long long)N);
    CU_OK(r);
    assert_true(first != (unsigned long long)N);
    munmap(m, N * sizeof(int));
    close(fa);
    close(fb);
    unlink(a.c_str());
    unlink(b.c_str());
}

/* ---- children ---- */

static int child_uffd(void)
{
    if (sim_test_setup(NULL))
        return 10;
    std::string path = "/dev/shm/simgpu-hmm-uffd." + std::to_string(getpid());
    int fd;
    int *m = map_file(path, &fd);
    unlink(path.c_str());
    if (!m)
        return 11;
    int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (uffd < 0)
        return 77;      /* no userfaultfd here: nothing to test */
    struct uffdio_api api = { UFFD_API, 0, 0 };
    struct uffdio_register reg = {};
    reg.range.start = (uintptr_t)m;
    reg.range.len = N * sizeof(int);
    reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    if (ioctl(uffd, UFFDIO_API, &api) || ioctl(uffd, UFFDIO_REGISTER, &reg))
        return 77;
    CUresult r;
    sum_on_device(m, N, &r);
    CUresult again = cuCtxSynchronize();
    printf("uffd: %d %d\n", (int)r, (int)again);
    return r == CUDA_ERROR_ILLEGAL_ADDRESS && again == CUDA_ERROR_ILLEGAL_ADDRESS ? 0 : 12;
}

static int child_atomic(void)
{
    if (sim_test_setup(NULL))
        return 10;
    std::string path = dir() + "/hmm-atomic." + std::to_string(getpid());
    int fd;
    int *m = map_file(path, &fd);
    if (!m)
        return 11;
    /* a plain read first: the kernel reaches the file */
    CUresult r;
    sum_on_device(m, N, &r);
    if (r != CUDA_SUCCESS)
        return 12;
    unsigned *u;
    unsigned long long *ull;
    float *f;
    if (cuMemAllocHost((void **)&u, 64))
        return 13;
    ull = (unsigned long long *)(u + 4);
    f = (float *)(u + 12);
    void *args[] = { &m, &u, &ull, &f };
    if (cuLaunchKernel(fn((const void *)atomics), 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL))
        return 14;
    r = cuCtxSynchronize();
    unlink(path.c_str());
    printf("atomic: %d\n", (int)r);
    return r == CUDA_ERROR_ILLEGAL_ADDRESS ? 0 : 15;
}

static int child_no_hmm(void)
{
    if (sim_test_setup(NULL))
        return 10;
    int v = 1;
    if (cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, 0) || v != 0)
        return 11;
    std::string path = dir() + "/hmm-off." + std::to_string(getpid());
    int fd;
    int *m = map_file(path, &fd);
    if (!m)
        return 12;
    CUresult r;
    sum_on_device(m, N, &r);
    unlink(path.c_str());
    printf("no hmm: %d\n", (int)r);
    return r == CUDA_ERROR_ILLEGAL_ADDRESS ? 0 : 13;
}

static int run_child(const char *name, bool hmm)
{
    const char *set[] = { hmm ? "SIMGPU_HMM=1" : "SIMGPU_HMM=0", NULL };
    return sim_run_self("--child", name, set, NULL, 0);
}

static void test_a_userfaultfd_range_is_an_illegal_address(void **)
{
    int rc = run_child("uffd", true);
    if (rc == 77)
        skip();
    assert_int_equal(rc, 0);
}

static void test_an_atomic_on_a_file_page_is_an_illegal_address(void **)
{
    assert_int_equal(run_child("atomic", true), 0);
}

static void test_without_the_knob_a_file_mapping_faults(void **)
{
    assert_int_equal(run_child("no_hmm", false), 0);
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "--child")) {
        if (!strcmp(argv[2], "uffd"))
            return child_uffd();
        if (!strcmp(argv[2], "atomic"))
            return child_atomic();
        if (!strcmp(argv[2], "no_hmm"))
            return child_no_hmm();
        return 99;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pageable_memory_access_is_reported),
        cmocka_unit_test(test_kernels_read_and_write_a_file_mapping_without_registration),
        cmocka_unit_test(test_a_remapped_address_shows_the_new_file),
        cmocka_unit_test(test_a_userfaultfd_range_is_an_illegal_address),
        cmocka_unit_test(test_an_atomic_on_a_file_page_is_an_illegal_address),
        cmocka_unit_test(test_without_the_knob_a_file_mapping_faults),
    };
    return cmocka_run_group_tests_name("hmm", tests, sim_test_setup, NULL);
}
