// The shim's kernels as it ships them to a real GPU: nvcc -ptx turns this
// file into the PTX text embedded in libgaia.so (loaded with
// cuModuleLoadData at the first sync that needs it).
#include "diff_pages.h"

extern "C" __global__ void gaia_diff_pages(const unsigned long long *replica,
					   const unsigned long long *base,
					   unsigned long long npages, unsigned char *changed)
{
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long p = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	     p < npages; p += stride)
		changed[p] = (unsigned char)gaia_diff_one_page(replica, base, p);
}

extern "C" __global__ void gaia_gather_changes(const unsigned long long *replica,
					       const unsigned long long *base,
					       const unsigned long long *pages, unsigned long long n,
					       unsigned long long *out_pages, unsigned char *out_masks)
{
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += stride)
		gaia_gather_one_page(replica, base, pages[i], i, out_pages, out_masks);
}

extern "C" __global__ void gaia_rebase_pages(unsigned long long *replica, unsigned long long *base,
					     unsigned long long first, unsigned long long npages,
					     const unsigned long long *cpu)
{
	unsigned long long words = npages * GAIA_DIFF_WORDS_PER_PAGE;
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long w = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; w < words;
	     w += stride)
		gaia_rebase_word_at(replica, base, first, cpu, w);
}
