/* The device side of a sync's diff (DESIGN §3.3): which pages of a replica
 * differ from their base copies; and of a launch's rebase, which may run
 * while earlier kernels still store into the replica. One source for both
 * targets: nvcc compiles it into the PTX the shim loads with
 * cuModuleLoadData (diff_pages.cu), and the C build runs the same body
 * where the simulated device runs kernels (gpu_kernels.c). */
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

/* A 64-bit word of device memory that kernels of the program may be
 * storing into while the shim's kernel reads or replaces it. */
#if defined(__CUDACC__)
GAIA_DEVICE_FN unsigned long long gaia_word_load(unsigned long long *w)
{
	return *(volatile unsigned long long *)w;
}
GAIA_DEVICE_FN int gaia_word_cas(unsigned long long *w, unsigned long long seen, unsigned long long want)
{
	return atomicCAS(w, seen, want) == seen;
}
#else
/* A unit test may define it to store into the word right after it was
 * read, as a running kernel may. */
#ifndef GAIA_AFTER_WORD_LOAD
#define GAIA_AFTER_WORD_LOAD(w) ((void)(w))
#endif
GAIA_DEVICE_FN unsigned long long gaia_word_load(unsigned long long *w)
{
	unsigned long long v = __atomic_load_n(w, __ATOMIC_RELAXED);
	GAIA_AFTER_WORD_LOAD(w);
	return v;
}
GAIA_DEVICE_FN int gaia_word_cas(unsigned long long *w, unsigned long long seen, unsigned long long want)
{
	return __atomic_compare_exchange_n(w, &seen, want, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}
#endif

/* 0xff in each byte of x that is not zero. */
GAIA_DEVICE_FN unsigned long long gaia_nonzero_bytes(unsigned long long x)
{
	x |= x >> 1;
	x |= x >> 2;
	x |= x >> 4;
	return (x & 0x0101010101010101ull) * 0xffull;
}

/* The rebase rule (lrc_page_rebase without a protect record) for one word
 * of a replica, while kernels of the program may still store into it: each
 * byte the device has not changed since its base (replica == base) takes
 * the CPU's value, in the replica and in the base; a byte it changed stays.
 * The replica word is replaced by compare-and-swap against what was read,
 * so a store that lands between the read and the swap fails the swap and
 * the word is looked at again: no store of a running kernel is lost. (A
 * store of the value the byte already had cannot be told from no store, as
 * at any diff against a base.) Only the shim writes the base. */
GAIA_DEVICE_FN void gaia_rebase_one_word(unsigned long long *replica, unsigned long long *base,
					 unsigned long long cpu)
{
	unsigned long long b = *base;
	for (;;) {
		unsigned long long dev = gaia_word_load(replica);
		unsigned long long keep = gaia_nonzero_bytes(dev ^ b); /* bytes the device changed */
		unsigned long long want = (dev & keep) | (cpu & ~keep);
		if (want == dev || gaia_word_cas(replica, dev, want)) {
			*base = (b & keep) | (cpu & ~keep);
			return;
		}
	}
}

/* Word w (of npages * GAIA_DIFF_WORDS_PER_PAGE) of a rebase of the pages
 * [first, first + npages) of a replica; cpu holds the CPU's bytes of
 * those pages, in order. */
GAIA_DEVICE_FN void gaia_rebase_word_at(unsigned long long *replica, unsigned long long *base,
					unsigned long long first, const unsigned long long *cpu,
					unsigned long long w)
{
	unsigned long long at = first * GAIA_DIFF_WORDS_PER_PAGE + w;
	gaia_rebase_one_word(replica + at, base + at, cpu[w]);
}

#endif
