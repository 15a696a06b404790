/* The byte-level meaning of the engine's actions (lrc.h) for one 4 KiB
 * page on plain buffers. The model test and the host side of the shim use
 * these; a device backend runs the same rules where the bytes are. */
#ifndef GAIA_LRC_PAGE_H
#define GAIA_LRC_PAGE_H

#include <stdint.h>

#include "merge.h"

/* A protect record (lrc.h): bytes a higher device wrote, with the value it
 * left in the CPU page. */
struct lrc_protect {
	uint8_t mask[MERGE_PAGE_BYTES];  /* 0xff: protected */
	uint8_t value[MERGE_PAGE_BYTES];
};

/* LRC_UPLOAD: dev := cpu, and base := cpu when base is not NULL. */
void lrc_page_upload(uint8_t *dev, uint8_t *base, const uint8_t *cpu);
/* LRC_REBASE (prot may be NULL: no record). */
void lrc_page_rebase(uint8_t *dev, uint8_t *base, const uint8_t *cpu,
		     const struct lrc_protect *prot);
/* LRC_MERGE_TO_CPU (prot may be NULL). Returns the bytes stored into cpu. */
uint64_t lrc_page_merge_to_cpu(uint8_t *cpu, const uint8_t *dev, const uint8_t *base,
			       const struct lrc_protect *prot);
/* Before LRC_MERGE_TO_CPU: the bytes of the page this device changed that a
 * higher device also changed, to another value, in the same interval (its
 * protect record holds them, and its value is the CPU's): the writes that
 * lose. 0 without a record. */
uint64_t lrc_page_conflicts(const uint8_t *cpu, const uint8_t *dev, const uint8_t *base,
			    const struct lrc_protect *prot);
/* LRC_PROTECT_SAVE into `into` (the lower device's record). */
void lrc_page_protect_save(struct lrc_protect *into, const uint8_t *dev, const uint8_t *base,
			   const uint8_t *cpu);
/* LRC_PROTECT_REFRESH. */
void lrc_page_protect_refresh(struct lrc_protect *prot, const uint8_t *cpu);

#endif
