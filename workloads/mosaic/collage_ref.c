/*
 * collage_ref.c — see collage_ref.h.  The same steps as the kernels, tile
 * by tile, with the same functions from collage_math.h.
 */
#include "collage_ref.h"

#include <stdlib.h>
#include <string.h>

#include "mosaic_util.h"

int collage_reference(const struct collage_db *db, const struct mosaic_image *in, struct mosaic_image *out,
		      unsigned long long *best, uint64_t *bytes_read)
{
	const struct collage_lsh *l = &db->lsh;
	uint32_t tiles_x = in->width / COLLAGE_SIDE, tiles_y = in->height / COLLAGE_SIDE;
	size_t nstart = (size_t)l->tables * (l->buckets + 1), nids = (size_t)l->tables * db->images;
	uint32_t *index = malloc((nstart + nids) * 4);
	out->width = in->width;
	out->height = in->height;
	out->rgba = malloc((size_t)in->width * in->height * 4);
	*bytes_read = 0;
	if (index == NULL || out->rgba == NULL) {
		mosaic_err("out of memory for the reference collage");
		free(index);
		mosaic_image_free(out);
		return -1;
	}
	if (mosaic_pread_all(db->fd[2], db->path[2], index, (nstart + nids) * 4, MOSAIC_PAGE) != 0)
		goto fail;
	*bytes_read += (nstart + nids) * 4;
	for (uint32_t ty = 0; ty < tiles_y; ty++) {
		for (uint32_t tx = 0; tx < tiles_x; tx++) {
			uint32_t hist[COLLAGE_HIST_WORDS], cdf[COLLAGE_HIST_WORDS], mean[3];
			uint32_t rec[COLLAGE_RECORD_WORDS];
			memset(hist, 0, sizeof(hist));
			for (uint32_t y = 0; y < COLLAGE_SIDE; y++)
				for (uint32_t x = 0; x < COLLAGE_SIDE; x++) {
					uint32_t px = in->rgba[(size_t)(ty * COLLAGE_SIDE + y) * in->width +
							       tx * COLLAGE_SIDE + x];
					for (uint32_t c = 0; c < 3; c++)
						hist[c * 256 + collage_channel(px, c)]++;
				}
			collage_features(hist, cdf, mean);
			uint64_t b = COLLAGE_NO_MATCH;
			for (uint32_t t = 0; t < l->tables; t++) {
				const uint32_t *st = index + (size_t)t * (l->buckets + 1);
				const uint32_t *ids = index + nstart + (size_t)t * db->images;
				uint32_t key = collage_key(l, t, mean);
				uint32_t first = st[key], count = st[key + 1] - first;
				if (count > COLLAGE_CAND_PER_TABLE)
					count = COLLAGE_CAND_PER_TABLE;
				for (uint32_t r = 0; r < count; r++) {
					uint32_t id = ids[first + r];
					if (mosaic_pread_all(db->fd[1], db->path[1], rec, COLLAGE_HIST_WORDS * 4,
							     MOSAIC_PAGE + (uint64_t)id * MOSAIC_PAGE) != 0)
						goto fail;
					*bytes_read += COLLAGE_HIST_WORDS * 4;
					uint64_t p = collage_pack(collage_distance(cdf, rec), id);
					if (p < b)
						b = p;
				}
			}
			uint32_t tile = ty * tiles_x + tx;
			if (best != NULL)
				best[tile] = b;
			if (b != COLLAGE_NO_MATCH) {
				uint32_t id = (uint32_t)b;
				if (mosaic_pread_all(db->fd[0], db->path[0], rec, MOSAIC_PAGE,
						     MOSAIC_PAGE + (uint64_t)id * MOSAIC_PAGE) != 0)
					goto fail;
				*bytes_read += MOSAIC_PAGE;
			} else {
				for (uint32_t i = 0; i < COLLAGE_PIXELS; i++)
					rec[i] = collage_flat_pixel(mean);
			}
			for (uint32_t y = 0; y < COLLAGE_SIDE; y++)
				memcpy(out->rgba + (size_t)(ty * COLLAGE_SIDE + y) * in->width + tx * COLLAGE_SIDE,
				       rec + y * COLLAGE_SIDE, COLLAGE_SIDE * 4);
		}
	}
	free(index);
	return 0;
fail:
	free(index);
	mosaic_image_free(out);
	return -1;
}
