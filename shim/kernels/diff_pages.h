/* The device side of a sync's diff (DESIGN §3.3): which pages of a replica
 * differ from their base copies. One source for both targets: nvcc compiles
 * it into the PTX the shim loads with cuModuleLoadData (diff_pages.cu), and
 * the C build runs the same body where the simulated device runs kernels
 * (gpu_kernels.c). */
#ifndef GAIA_DIFF_PAGES_H
#define GAIA_DIFF_PAGES_H

#if defined(__CUDACC__)
#define GAIA_DEVICE_FN __device__ __forceinline__
#else
#define GAIA_DEVICE_FN static inline
#endif

#define GAIA_DIFF_WORDS_PER_PAGE 512u /* 4 KiB pages of 64-bit words */
/* Threads per block of the diff launch; each thread compares whole pages. */
#define GAIA_DIFF_BLOCK 128u

/* Whether page `page` of the replica differs from its base. The diff
 * kernel writes the answer as one byte per page: every byte is written,
 * so the answer needs no clearing beforehand. */
GAIA_DEVICE_FN int gaia_diff_one_page(const unsigned long long *replica,
				      const unsigned long long *base, unsigned long long page)
{
	const unsigned long long *a = replica + page * GAIA_DIFF_WORDS_PER_PAGE;
	const unsigned long long *b = base + page * GAIA_DIFF_WORDS_PER_PAGE;
	unsigned long long acc = 0;
	for (unsigned w = 0; w < GAIA_DIFF_WORDS_PER_PAGE; w++)
		acc |= a[w] ^ b[w];
	return acc != 0;
}

/* One page of a sync's download: copies page pages[i] of the replica to
 * slot i of out_pages and writes, in slot i of out_masks (512 bytes a
 * page), one byte per 8-byte word whose bit k says byte k of the word
 * differs from the base: the host merges exactly those bytes. */
GAIA_DEVICE_FN void gaia_gather_one_page(const unsigned long long *replica,
					 const unsigned long long *base,
					 unsigned long long page, unsigned long long slot,
					 unsigned long long *out_pages, unsigned char *out_masks)
{
	const unsigned long long *a = replica + page * GAIA_DIFF_WORDS_PER_PAGE;
	const unsigned long long *b = base + page * GAIA_DIFF_WORDS_PER_PAGE;
	unsigned long long *o = out_pages + slot * GAIA_DIFF_WORDS_PER_PAGE;
	unsigned char *mask = out_masks + slot * GAIA_DIFF_WORDS_PER_PAGE;
	for (unsigned w = 0; w < GAIA_DIFF_WORDS_PER_PAGE; w++) {
		unsigned long long x = a[w] ^ b[w];
		o[w] = a[w];
		/* Bit 0 of each byte: the byte is not zero; then the eight bits
		 * gathered into the top byte (bit k from byte k). */
		x |= x >> 1;
		x |= x >> 2;
		x |= x >> 4;
		x &= 0x0101010101010101ull;
		mask[w] = (unsigned char)((x * 0x0102040810204080ull) >> 56);
	}
}

#endif
