/* slow_sum.h — a kernel that keeps the device busy for a while, for the
 * isolation programs that measure what waits for it. */
#ifndef GAIA_TEST_SLOW_SUM_H
#define GAIA_TEST_SLOW_SUM_H

/* Block 0, thread 0 spins for `ns` (clock64() counts nanoseconds on the
 * simulator); then out[0] = w[0] + w[1]. */
__global__ void slow_sum(const unsigned *w, unsigned *out, long long ns)
{
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		long long t0 = clock64();
		while (clock64() - t0 < ns)
			;
		out[0] = w[0] + w[1];
	}
}
SIMGPU_KERNEL(slow_sum);

#endif
