/* rng.h — the workload's deterministic random numbers: SplitMix64
 * (Steele, Lea, Flood, "Fast splittable pseudorandom number generators",
 * OOPSLA'14), one 64-bit state, so a seed names a graph or an update
 * sequence exactly. */
#ifndef GUNROCK_RNG_H
#define GUNROCK_RNG_H

#include <stdint.h>

struct rng {
    uint64_t state;
};

static inline uint64_t rng_next(struct rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 bits. */
static inline double rng_unit(struct rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform in [0, n), n > 0 (Lemire's multiply-shift; the bias is below
 * 2^-32 for the ranges used here). */
static inline uint64_t rng_below(struct rng *r, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)rng_next(r) * n) >> 64);
}

#endif /* GUNROCK_RNG_H */
