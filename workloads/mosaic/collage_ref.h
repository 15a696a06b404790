/*
 * collage_ref.h — the collage computed on the CPU, reading the database
 * files on demand with pread: the reference every GPU mode must match
 * byte for byte, and the "cpu" row of the benchmark.
 */
#ifndef COLLAGE_REF_H
#define COLLAGE_REF_H

#include <stdint.h>

#include "collage_db.h"
#include "mosaic_image.h"

/* The input's sides must be multiples of 32 (checked by the caller).
 * out gets an image of the same size; best (tiles entries, may be NULL) the
 * packed (distance, id) per tile; *bytes_read the bytes read from the
 * database.  0 or -1 (reported). */
int collage_reference(const struct collage_db *db, const struct mosaic_image *in, struct mosaic_image *out,
		      unsigned long long *best, uint64_t *bytes_read);

#endif /* COLLAGE_REF_H */
