/* 3-way diff-merge of one 4 KiB page (DESIGN §1 promise 3, §3.1, §3.3).
 *
 * Three implementations of the same two functions, chosen once at run time
 * from the CPU's features (merge_set_isa can force one):
 *   AVX-512BW  64 bytes a step; byte-masked stores (vmovdqu8 with a mask),
 *   AVX2       32 bytes a step; a whole vector is stored only when all 32
 *              bytes changed, otherwise the changed bytes one by one,
 *   scalar     8 bytes a step with 64-bit words, same rule per word.
 * All three give identical results, identical return values and the same
 * set of stored bytes in merge_page_into: a byte whose src equals its base
 * is never stored to, not even with its own value, because the CPU may be
 * storing to it concurrently (the in-place merge of §3.1 runs on the live
 * page cache while the application keeps writing to other bytes).
 * merge_page3 has a third, batch form per vector ISA (merge_stream3_*):
 * the same merge over many pages with non-temporal stores, used by
 * merge_pages3 for large batches only, as they cost a cache-resident
 * single page more than double (42 -> ~100 ns).
 */
#include "merge.h"

#include <errno.h>
#include <immintrin.h>
#include <string.h>

/* ---- scalar: 64-bit words ------------------------------------------- */

#define MERGE_BYTES_01 0x0101010101010101ull
#define MERGE_BYTES_7F 0x7f7f7f7f7f7f7f7full
#define MERGE_BYTES_80 0x8080808080808080ull

static inline uint64_t load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* 0x80 in every byte of x that is non-zero, 0 elsewhere. Exact (no false
 * positives from borrows): the low seven bits are added without carrying
 * into the next byte, and the top bit is or-ed in directly. */
static inline uint64_t nonzero_bytes(uint64_t x)
{
	return (((x & MERGE_BYTES_7F) + MERGE_BYTES_7F) | x) & MERGE_BYTES_80;
}

/* Number of 0x80 bytes in a nonzero_bytes() result; a multiply instead of
 * popcount, which the baseline x86-64 target does not have. */
static inline unsigned count_flagged_bytes(uint64_t flags)
{
	return (unsigned)(((flags >> 7) * MERGE_BYTES_01) >> 56);
}

static size_t merge_into_scalar(uint8_t *dst, const uint8_t *base, const uint8_t *src)
{
	size_t changed = 0;

	for (size_t i = 0; i < MERGE_PAGE_BYTES; i += 8) {
		uint64_t s = load64(src + i);
		uint64_t flags = nonzero_bytes(s ^ load64(base + i));

		if (flags == 0)
			continue;
		changed += count_flagged_bytes(flags);
		if (flags == MERGE_BYTES_80) {
			memcpy(dst + i, &s, sizeof(s));
			continue;
		}
		while (flags) {
			unsigned j = (unsigned)__builtin_ctzll(flags) >> 3;

			dst[i + j] = src[i + j];
			flags &= flags - 1;
		}
	}
	return changed;
}

static size_t merge_page3_scalar(uint8_t *out, const uint8_t *base, const uint8_t *lo,
				 const uint8_t *hi)
{
	size_t conflicts = 0;

	for (size_t i = 0; i < MERGE_PAGE_BYTES; i += 8) {
		uint64_t b = load64(base + i), l = load64(lo + i), h = load64(hi + i);
		uint64_t hi_changed = nonzero_bytes(h ^ b);
		uint64_t take_hi = (hi_changed >> 7) * 0xff;
		uint64_t both = hi_changed & nonzero_bytes(l ^ b) & nonzero_bytes(l ^ h);
		uint64_t o = (h & take_hi) | (l & ~take_hi);

		conflicts += count_flagged_bytes(both);
		memcpy(out + i, &o, sizeof(o));
	}
	return conflicts;
}

/* ---- AVX2: 32 bytes a step ------------------------------------------ */

__attribute__((target("avx2,popcnt"))) static size_t
merge_into_avx2(uint8_t *dst, const uint8_t *base, const uint8_t *src)
{
	size_t changed = 0;

	for (size_t i = 0; i < MERGE_PAGE_BYTES; i += 32) {
		__m256i s = _mm256_loadu_si256((const __m256i *)(src + i));
		__m256i b = _mm256_loadu_si256((const __m256i *)(base + i));
		uint32_t diff = ~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(s, b));

		if (diff == 0)
			continue;
		changed += (size_t)__builtin_popcount(diff);
		if (diff == UINT32_MAX) {
			_mm256_storeu_si256((__m256i *)(dst + i), s);
			continue;
		}
		while (diff) {
			unsigned j = (unsigned)__builtin_ctz(diff);

			dst[i + j] = src[i + j];
			diff &= diff - 1;
		}
	}
	return changed;
}

/* One 32-byte step of the general merge: the merged bytes, and in
 * *conflicts the bytes both sides changed to different values. */
__attribute__((target("avx2,popcnt"), always_inline)) static inline __m256i
merge3_step_avx2(const uint8_t *base, const uint8_t *lo, const uint8_t *hi, size_t *conflicts)
{
	__m256i b = _mm256_loadu_si256((const __m256i *)base);
	__m256i l = _mm256_loadu_si256((const __m256i *)lo);
	__m256i h = _mm256_loadu_si256((const __m256i *)hi);
	__m256i hi_same = _mm256_cmpeq_epi8(h, b);
	__m256i any_same = _mm256_or_si256(
		hi_same, _mm256_or_si256(_mm256_cmpeq_epi8(l, b), _mm256_cmpeq_epi8(l, h)));

	*conflicts += (size_t)__builtin_popcount(~(uint32_t)_mm256_movemask_epi8(any_same));
	return _mm256_blendv_epi8(h, l, hi_same);
}

__attribute__((target("avx2,popcnt"))) static size_t
merge_page3_avx2(uint8_t *out, const uint8_t *base, const uint8_t *lo, const uint8_t *hi)
{
	size_t conflicts = 0;

	for (size_t i = 0; i < MERGE_PAGE_BYTES; i += 32)
		_mm256_storeu_si256((__m256i *)(out + i),
				    merge3_step_avx2(base + i, lo + i, hi + i, &conflicts));
	return conflicts;
}

/* Batch form of merge_page3_avx2 over `bytes` contiguous bytes with
 * non-temporal stores: out must be 32-byte aligned and must not overlap
 * the inputs (a streamed line goes to memory while the cache may still hold
 * a stale copy only if something else wrote it, and nothing does). The
 * caller issues the sfence that orders the streamed lines. */
__attribute__((target("avx2,popcnt"))) static size_t
merge_stream3_avx2(uint8_t *out, const uint8_t *base, const uint8_t *lo, const uint8_t *hi,
		   size_t bytes)
{
	size_t conflicts = 0;

	for (size_t i = 0; i < bytes; i += 32)
		_mm256_stream_si256((__m256i *)(out + i),
				    merge3_step_avx2(base + i, lo + i, hi + i, &conflicts));
	return conflicts;
}

/* ---- AVX-512BW: 64 bytes a step, byte-masked stores ------------------ */

/* A masked-out byte of vmovdqu8 is neither written nor checked for faults
 * (Intel SDM vol. 1 §15.4.1, "memory fault suppression"), so a zero mask
 * stores nothing at all. */
__attribute__((target("avx512bw,avx512f,popcnt"))) static size_t
merge_into_avx512(uint8_t *dst, const uint8_t *base, const uint8_t *src)
{
	size_t changed = 0;

	for (size_t i = 0; i < MERGE_PAGE_BYTES; i += 64) {
		__m512i s = _mm512_loadu_si512(src + i);
		__mmask64 diff = _mm512_cmpneq_epi8_mask(s, _mm512_loadu_si512(base + i));

		_mm512_mask_storeu_epi8(dst + i, diff, s);
		changed += (size_t)__builtin_popcountll(diff);
	}
	return changed;
}

/* One 64-byte step of the general merge (as merge3_step_avx2). */
__attribute__((target("avx512bw,avx512f,popcnt"), always_inline)) static inline __m512i
merge3_step_avx512(const uint8_t *base, const uint8_t *lo, const uint8_t *hi, size_t *conflicts)
{
	__m512i b = _mm512_loadu_si512(base);
	__m512i l = _mm512_loadu_si512(lo);
	__m512i h = _mm512_loadu_si512(hi);
	__mmask64 hi_changed = _mm512_cmpneq_epi8_mask(h, b);
	__mmask64 both = _mm512_mask_cmpneq_epi8_mask(hi_changed, l, b);

	both = _mm512_mask_cmpneq_epi8_mask(both, l, h);
	*conflicts += (size_t)__builtin_popcountll(both);
	return _mm512_mask_blend_epi8(hi_changed, l, h);
}

__attribute__((target("avx512bw,avx512f,popcnt"))) static size_t
merge_page3_avx512(uint8_t *out, const uint8_t *base, const uint8_t *lo, const uint8_t *hi)
{
	size_t conflicts = 0;

	for (size_t i = 0; i < MERGE_PAGE_BYTES; i += 64)
		_mm512_storeu_si512(out + i, merge3_step_avx512(base + i, lo + i, hi + i, &conflicts));
	return conflicts;
}

/* merge_stream3_avx2 with 64-byte steps; out must be 64-byte aligned. */
__attribute__((target("avx512bw,avx512f,popcnt"))) static size_t
merge_stream3_avx512(uint8_t *out, const uint8_t *base, const uint8_t *lo, const uint8_t *hi,
		     size_t bytes)
{
	size_t conflicts = 0;

	for (size_t i = 0; i < bytes; i += 64)
		_mm512_stream_si512((void *)(out + i),
				    merge3_step_avx512(base + i, lo + i, hi + i, &conflicts));
	return conflicts;
}

/* ---- selection ------------------------------------------------------ */

struct merge_impl {
	size_t (*into)(uint8_t *dst, const uint8_t *base, const uint8_t *src);
	size_t (*page3)(uint8_t *out, const uint8_t *base, const uint8_t *lo, const uint8_t *hi);
	/* NULL where the ISA has no non-temporal vector store (scalar). */
	size_t (*stream3)(uint8_t *out, const uint8_t *base, const uint8_t *lo, const uint8_t *hi,
			  size_t bytes);
};

static const struct merge_impl merge_impls[] = {
	[MERGE_ISA_SCALAR] = { merge_into_scalar, merge_page3_scalar, NULL },
	[MERGE_ISA_AVX2] = { merge_into_avx2, merge_page3_avx2, merge_stream3_avx2 },
	[MERGE_ISA_AVX512] = { merge_into_avx512, merge_page3_avx512, merge_stream3_avx512 },
};

#define MERGE_ISA_COUNT (sizeof(merge_impls) / sizeof(merge_impls[0]))

/* NULL until the first merge or merge_set_isa; then never NULL again. */
static const struct merge_impl *merge_active;

static int merge_cpu_has(enum merge_isa isa)
{
	__builtin_cpu_init();
	switch (isa) {
	case MERGE_ISA_SCALAR:
		return 1;
	case MERGE_ISA_AVX2:
		return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
	case MERGE_ISA_AVX512:
		return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		       __builtin_cpu_supports("popcnt");
	}
	return 0;
}

static enum merge_isa merge_best_isa(void)
{
	if (merge_cpu_has(MERGE_ISA_AVX512))
		return MERGE_ISA_AVX512;
	if (merge_cpu_has(MERGE_ISA_AVX2))
		return MERGE_ISA_AVX2;
	return MERGE_ISA_SCALAR;
}

/* Lazy and lock-free: racing first callers all pick the same best ISA; a
 * compare-and-swap keeps an ISA forced meanwhile by merge_set_isa. */
static const struct merge_impl *merge_active_impl(void)
{
	const struct merge_impl *m = __atomic_load_n(&merge_active, __ATOMIC_ACQUIRE);

	if (__builtin_expect(m == NULL, 0)) {
		const struct merge_impl *best = &merge_impls[merge_best_isa()];

		m = NULL;
		if (__atomic_compare_exchange_n(&merge_active, &m, best, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			m = best;
	}
	return m;
}

enum merge_isa merge_get_isa(void)
{
	return (enum merge_isa)(merge_active_impl() - merge_impls);
}

int merge_set_isa(enum merge_isa isa)
{
	if ((unsigned)isa >= MERGE_ISA_COUNT)
		return -EINVAL;
	if (!merge_cpu_has(isa))
		return -ENOTSUP;
	__atomic_store_n(&merge_active, &merge_impls[isa], __ATOMIC_RELEASE);
	return 0;
}

const char *merge_isa_name(enum merge_isa isa)
{
	switch (isa) {
	case MERGE_ISA_SCALAR:
		return "scalar";
	case MERGE_ISA_AVX2:
		return "avx2";
	case MERGE_ISA_AVX512:
		return "avx512bw";
	}
	return "unknown";
}

size_t merge_page_into(uint8_t *dst, const uint8_t *base, const uint8_t *src)
{
	return merge_active_impl()->into(dst, base, src);
}

size_t merge_page3(uint8_t *out, const uint8_t *base, const uint8_t *lo, const uint8_t *hi)
{
	return merge_active_impl()->page3(out, base, lo, hi);
}

/* [a, a + n) and [b, b + n) share a byte. Compared as integers: the
 * buffers may come from different allocations. */
static int ranges_overlap(const uint8_t *a, const uint8_t *b, size_t n)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	return x < y + n && y < x + n;
}

/* Non-temporal stores pay only when out would not stay in the cache
 * anyway and nobody reads it back soon: a batch of MERGE_STREAM_MIN_BYTES
 * or more (see merge.h for the measurement behind the figure). They need
 * an aligned out, and a distinct one: with out == lo or hi the line was
 * just read into the cache, so an ordinary store costs no read-for-
 * ownership and streaming it would only evict it (and an sfence'd store
 * over a partly overlapping input would change what later loads read). */
size_t merge_pages3(uint8_t *out, const uint8_t *base, const uint8_t *lo, const uint8_t *hi,
		    size_t npages)
{
	const struct merge_impl *m = merge_active_impl();
	size_t bytes = npages * MERGE_PAGE_BYTES;
	size_t conflicts = 0;

	if (m->stream3 && bytes >= MERGE_STREAM_MIN_BYTES && ((uintptr_t)out & 63) == 0 &&
	    !ranges_overlap(out, base, bytes) && !ranges_overlap(out, lo, bytes) &&
	    !ranges_overlap(out, hi, bytes)) {
		conflicts = m->stream3(out, base, lo, hi, bytes);
		_mm_sfence();
		return conflicts;
	}
	for (size_t off = 0; off < bytes; off += MERGE_PAGE_BYTES)
		conflicts += m->page3(out + off, base + off, lo + off, hi + off);
	return conflicts;
}

/* A pure comparison with no store contract: libc's memcmp is already
 * vectorised for the CPU at hand and stops at the first difference. */
int merge_page_differs(const uint8_t *a, const uint8_t *b)
{
	return memcmp(a, b, MERGE_PAGE_BYTES) != 0;
}

size_t merge_page_masked(uint8_t *dst, const uint8_t *src, const uint8_t *mask)
{
	size_t stored = 0;
	for (unsigned w = 0; w < MERGE_PAGE_BYTES / 8; w++) {
		/* Eight words at a time where their mask bytes agree. */
		if (w % 8 == 0) {
			uint64_t m8;
			memcpy(&m8, mask + w, 8);
			if (m8 == 0) {
				w += 7;
				continue;
			}
			if (m8 == UINT64_MAX) {
				memcpy(dst + 8 * w, src + 8 * w, 64);
				stored += 64;
				w += 7;
				continue;
			}
		}
		uint8_t m = mask[w];
		if (!m)
			continue;
		if (m == 0xff) {
			memcpy(dst + 8 * w, src + 8 * w, 8);
			stored += 8;
			continue;
		}
		for (unsigned k = 0; k < 8; k++) {
			if (m >> k & 1) {
				dst[8 * w + k] = src[8 * w + k];
				stored++;
			}
		}
	}
	return stored;
}
