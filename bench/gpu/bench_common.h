/* What the GPU benchmarks share: the page size, and dying with a message
 * prefixed by BENCH_NAME (defined before including this). */
#ifndef GAIA_BENCH_COMMON_H
#define GAIA_BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#define PAGE 4096ull

#define DIE(...)                                                                           \
	do {                                                                               \
		fprintf(stderr, BENCH_NAME ": " __VA_ARGS__);                              \
		fprintf(stderr, "\n");                                                     \
		exit(1);                                                                   \
	} while (0)
#define CUDA_OK(call)                                                                      \
	do {                                                                               \
		cudaError_t e_ = (call);                                                   \
		if (e_ != cudaSuccess)                                                     \
			DIE("%s: %s", #call, cudaGetErrorName(e_));                        \
	} while (0)

#endif
