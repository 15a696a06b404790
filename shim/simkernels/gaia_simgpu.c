/* libgaia-simgpu.so: the shim's kernels for the simulated GPU, which runs
 * registered C kernels instead of PTX (simgpu/README.md). The bodies are
 * the ones the PTX is compiled from (kernels/diff_pages.h); here each is
 * wrapped as the simulated device runs any kernel, whole blocks at a
 * time, and registered under the PTX entry's name. libgaia.so loads this
 * library from its own directory only when the driver is the simulator,
 * so the production library carries no simulator code. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>

#include "../gpu_kernels.h"
#include "../kernels/diff_pages.h"
#include "simgpu.h"

/* The kernel's parameters, laid out as the PTX entry declares them. */
struct diff_args {
	const unsigned long long *replica;
	const unsigned long long *base;
	unsigned long long npages;
	unsigned char *changed;
};

/* Runs blocks [begin, end) of a diff launch: every thread of a block in
 * turn, as the simulated device runs any kernel. */
static void diff_pages_blocks(const void *args, const struct simgpu_launch_dims *dims,
			      uint64_t begin, uint64_t end)
{
	const struct diff_args *a = args;
	uint64_t threads = (uint64_t)dims->block[0];
	uint64_t stride = (uint64_t)dims->grid[0] * threads;
	for (uint64_t b = begin; b < end; b++) {
		for (uint64_t t = 0; t < threads; t++) {
			for (uint64_t p = b * threads + t; p < a->npages; p += stride)
				a->changed[p] = (unsigned char)gaia_diff_one_page(a->replica, a->base, p);
		}
	}
}

struct gather_args {
	const unsigned long long *replica;
	const unsigned long long *base;
	const unsigned long long *pages;
	unsigned long long n;
	unsigned long long *out_pages;
	unsigned char *out_masks;
};

static void gather_changes_blocks(const void *args, const struct simgpu_launch_dims *dims,
				  uint64_t begin, uint64_t end)
{
	const struct gather_args *a = args;
	uint64_t threads = (uint64_t)dims->block[0];
	uint64_t stride = (uint64_t)dims->grid[0] * threads;
	for (uint64_t b = begin; b < end; b++)
		for (uint64_t t = 0; t < threads; t++)
			for (uint64_t i = b * threads + t; i < a->n; i += stride)
				gaia_gather_one_page(a->replica, a->base, a->pages[i], i, a->out_pages,
						     a->out_masks);
}

struct rebase_args {
	unsigned long long *replica;
	unsigned long long *base;
	unsigned long long first;
	unsigned long long npages;
	const unsigned long long *cpu;
};

static void rebase_pages_blocks(const void *args, const struct simgpu_launch_dims *dims,
				uint64_t begin, uint64_t end)
{
	const struct rebase_args *a = args;
	uint64_t threads = (uint64_t)dims->block[0];
	uint64_t stride = (uint64_t)dims->grid[0] * threads;
	uint64_t words = a->npages * GAIA_DIFF_WORDS_PER_PAGE;
	for (uint64_t b = begin; b < end; b++)
		for (uint64_t t = 0; t < threads; t++)
			for (uint64_t w = b * threads + t; w < words; w += stride)
				gaia_rebase_word_at(a->replica, a->base, a->first, a->cpu, w);
}

/* The kernels' host-side identities: the registry keys kernels by address. */
static void gaia_diff_pages_host(void)
{
}

static void gaia_gather_changes_host(void)
{
}

static void gaia_rebase_pages_host(void)
{
}

static const unsigned diff_offsets[] = {offsetof(struct diff_args, replica),
					offsetof(struct diff_args, base),
					offsetof(struct diff_args, npages),
					offsetof(struct diff_args, changed)};
static const unsigned diff_sizes[] = {8, 8, 8, 8};
static const unsigned gather_offsets[] = {
	offsetof(struct gather_args, replica), offsetof(struct gather_args, base),
	offsetof(struct gather_args, pages),   offsetof(struct gather_args, n),
	offsetof(struct gather_args, out_pages), offsetof(struct gather_args, out_masks)};
static const unsigned gather_sizes[] = {8, 8, 8, 8, 8, 8};
static const unsigned rebase_offsets[] = {
	offsetof(struct rebase_args, replica), offsetof(struct rebase_args, base),
	offsetof(struct rebase_args, first), offsetof(struct rebase_args, npages),
	offsetof(struct rebase_args, cpu)};
static const unsigned rebase_sizes[] = {8, 8, 8, 8, 8};

/* Registers the three kernels with the simulator's registry function:
 * 0, or its first failure. */
__attribute__((visibility("default"))) int gaia_simgpu_register_kernels(int (*reg)(const struct simgpu_kernel_desc *));
int gaia_simgpu_register_kernels(int (*reg)(const struct simgpu_kernel_desc *))
{
	static const struct simgpu_kernel_desc desc = {
		.abi = SIMGPU_KERNEL_ABI,
		.name = GPU_DIFF_KERNEL,
		.func = (const void *)gaia_diff_pages_host,
		.trampoline = diff_pages_blocks,
		.nparams = 4,
		.param_offset = diff_offsets,
		.param_size = diff_sizes,
		.args_bytes = sizeof(struct diff_args),
	};
	static const struct simgpu_kernel_desc gather = {
		.abi = SIMGPU_KERNEL_ABI,
		.name = GPU_GATHER_KERNEL,
		.func = (const void *)gaia_gather_changes_host,
		.trampoline = gather_changes_blocks,
		.nparams = 6,
		.param_offset = gather_offsets,
		.param_size = gather_sizes,
		.args_bytes = sizeof(struct gather_args),
	};
	static const struct simgpu_kernel_desc rebase = {
		.abi = SIMGPU_KERNEL_ABI,
		.name = GPU_REBASE_KERNEL,
		.func = (const void *)gaia_rebase_pages_host,
		.trampoline = rebase_pages_blocks,
		.nparams = 5,
		.param_offset = rebase_offsets,
		.param_size = rebase_sizes,
		.args_bytes = sizeof(struct rebase_args),
	};
	int rc = reg(&desc);
	if (!rc)
		rc = reg(&gather);
	if (!rc)
		rc = reg(&rebase);
	return rc;
}
