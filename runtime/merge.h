/* 3-way diff-merge of one 4 KiB page (DESIGN §1 promise 3, §3.1, §3.3).
 *
 * Owners: the CPU is 0, device d is d+1. Where two replicas changed the
 * same byte since their common base, the higher owner id wins; where only
 * one changed it, that one's value is kept. Implementations: AVX-512BW,
 * AVX2 and scalar, chosen once at run time from the CPU's features; all
 * three give identical results and identical store patterns (a byte that
 * must not change is never written, not even with its own value).
 * Pages need not be aligned. Cost on one 4 KiB page in cache, AVX-512BW:
 * ~40 ns for merge_page3, ~20 ns for merge_page_into (bench/bench_merge).
 * merge_pages3 merges a batch of contiguous pages, streaming large ones.
 */
#ifndef GAIA_MERGE_H
#define GAIA_MERGE_H

#include <stddef.h>
#include <stdint.h>

#define MERGE_PAGE_BYTES 4096u

/* Smallest batch merge_pages3 writes with non-temporal stores. A batch
 * touches 4x its size (base, lo, hi, out); streaming out pays once that no
 * longer fits the last-level cache. Measured with AVX-512BW on an EPYC with
 * 32 MiB of L3, ns/page, loop of merge_page3 vs streamed (and with out read
 * back afterwards): 4 MiB batch 133 vs 133 (185 vs 222, streaming loses);
 * 8 MiB 185 vs 165 (257 vs 257); 32 MiB 325 vs 250 (415 vs 345). So the
 * first size that gains and costs a reader nothing: 8 MiB, a quarter of
 * that L3. Fixed rather than read from the CPU, so results are the same
 * wherever it runs; on a larger cache it only streams a little early. */
#define MERGE_STREAM_MIN_BYTES (8u << 20)

enum merge_isa { MERGE_ISA_SCALAR = 0, MERGE_ISA_AVX2 = 1, MERGE_ISA_AVX512 = 2 };

/* The implementation in use (the best the CPU supports, unless forced). */
enum merge_isa merge_get_isa(void);
/* Force an implementation (tests, benchmarks). 0, or -ENOTSUP when the CPU
 * lacks it. Not thread-safe with concurrent merges. */
int merge_set_isa(enum merge_isa isa);
const char *merge_isa_name(enum merge_isa isa);

/* In place: the device's page `src` and its base copy `base` applied onto
 * the CPU's page `dst`: for every byte i with src[i] != base[i],
 * dst[i] = src[i]; no other byte of dst is stored to, so concurrent CPU
 * stores to other bytes of dst survive (byte-masked stores, or byte stores
 * where the ISA has no byte mask). Returns the number of bytes changed by
 * the device (the count of i with src[i] != base[i]). */
size_t merge_page_into(uint8_t *dst, const uint8_t *base, const uint8_t *src);

/* The same from the source page and a byte mask instead of a base (bit k
 * of mask[w] set: byte 8w+k changed, as a device's diff reports them):
 * each changed byte stored into dst, no other byte touched (whole words at
 * once where all or none of their bytes changed). Returns the bytes stored. */
size_t merge_page_masked(uint8_t *dst, const uint8_t *src, const uint8_t *mask);

/* General form: out[i] = hi[i] != base[i] ? hi[i] : lo[i], where `hi` is
 * the replica with the higher owner id. Returns the number of conflicting
 * bytes: both changed (lo[i] != base[i] && hi[i] != base[i]) to different
 * values. `out` may alias `lo` or `hi`. */
size_t merge_page3(uint8_t *out, const uint8_t *base, const uint8_t *lo, const uint8_t *hi);

/* Batch of npages contiguous pages: the same result, byte for byte and in
 * the returned total conflict count, as merge_page3 on each page in turn;
 * `out` may equal `lo` or `hi` (the whole range), but must not otherwise
 * overlap the inputs.
 * Cache: for a batch of MERGE_STREAM_MIN_BYTES or more, with out 64-byte
 * aligned and distinct from all three inputs, the AVX-512BW and AVX2
 * implementations write out with non-temporal stores (then one sfence), so
 * out's contents are NOT left in the cache: reading them back soon after
 * comes from memory. This saves out's read-for-ownership, a fifth of a
 * streamed merge's memory traffic (merge_stream_vs_memcpy in
 * bench/bench_merge, AVX-512BW: 0.49-0.51 page by page, 0.63-0.65
 * batched). Smaller or aliased
 * batches, and the scalar implementation, use ordinary stores. */
size_t merge_pages3(uint8_t *out, const uint8_t *base, const uint8_t *lo, const uint8_t *hi,
		    size_t npages);

/* 1 when the two pages differ in any byte (the device-side dirty test). */
int merge_page_differs(const uint8_t *a, const uint8_t *b);

#endif
