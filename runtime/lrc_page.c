#include "lrc_page.h"

#include <string.h>

void lrc_page_upload(uint8_t *dev, uint8_t *base, const uint8_t *cpu)
{
	memcpy(dev, cpu, MERGE_PAGE_BYTES);
	if (base)
		memcpy(base, cpu, MERGE_PAGE_BYTES);
}

static inline int protected_here(const struct lrc_protect *prot, const uint8_t *cpu, unsigned i)
{
	return prot && prot->mask[i] && cpu[i] == prot->value[i];
}

void lrc_page_rebase(uint8_t *dev, uint8_t *base, const uint8_t *cpu,
		     const struct lrc_protect *prot)
{
	for (unsigned i = 0; i < MERGE_PAGE_BYTES; i++) {
		if (protected_here(prot, cpu, i) || dev[i] == base[i])
			dev[i] = base[i] = cpu[i];
	}
}

uint64_t lrc_page_merge_to_cpu(uint8_t *cpu, const uint8_t *dev, const uint8_t *base,
			       const struct lrc_protect *prot)
{
	if (!prot)
		return merge_page_into(cpu, base, dev);
	/* Protected bytes count as unchanged by this device: hand the merge
	 * a source that equals the base there. */
	uint8_t src[MERGE_PAGE_BYTES];
	for (unsigned i = 0; i < MERGE_PAGE_BYTES; i++)
		src[i] = protected_here(prot, cpu, i) ? base[i] : dev[i];
	return merge_page_into(cpu, base, src);
}

uint64_t lrc_page_conflicts(const uint8_t *cpu, const uint8_t *dev, const uint8_t *base,
			    const struct lrc_protect *prot)
{
	uint64_t n = 0;
	for (unsigned i = 0; prot && i < MERGE_PAGE_BYTES; i++)
		n += protected_here(prot, cpu, i) && dev[i] != base[i] && dev[i] != cpu[i];
	return n;
}

void lrc_page_protect_save(struct lrc_protect *into, const uint8_t *dev, const uint8_t *base,
			   const uint8_t *cpu)
{
	/* Only bytes where this device's write won (the CPU now holds its
	 * value): a byte it lost is already covered by the winner's record. */
	for (unsigned i = 0; i < MERGE_PAGE_BYTES; i++) {
		if (dev[i] != base[i] && cpu[i] == dev[i]) {
			into->mask[i] = 0xff;
			into->value[i] = cpu[i];
		}
	}
}

void lrc_page_protect_refresh(struct lrc_protect *prot, const uint8_t *cpu)
{
	for (unsigned i = 0; i < MERGE_PAGE_BYTES; i++) {
		if (prot->mask[i] && cpu[i] != prot->value[i])
			prot->mask[i] = 0;
	}
}
