/* The GAIA shim's explicit calls (GAIA paper, §4: macquire/mrelease).
 *
 * Unmodified programs never need them: under LD_PRELOAD=libgaia.so the
 * shim inserts acquire and release at kernel launches, host syncs, msync,
 * munmap and exit. Programs that want finer control, and tests, call them
 * directly. Link with -lgaia, or look them up with dlsym(RTLD_DEFAULT, ...)
 * to run both with and without the shim.
 *
 * Every function returns 0, or -1 with errno set:
 *   EINVAL  addr is not page aligned or len is 0;
 *   ENOENT  no managed mapping overlaps [addr, addr+len);
 *   ENODEV  device is neither GAIA_CPU nor the calling thread's current
 *           CUDA device (or the library has no CUDA side);
 *   ENOMEM  a device replica could not be made;
 *   EIO     a device transfer failed (the driver's error is logged).
 */
#ifndef GAIA_H
#define GAIA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The CPU replica, as a device argument. Devices are CUDA ordinals >= 0;
 * a device argument must be the calling thread's current device
 * (cudaSetDevice / the current context's). */
#define GAIA_CPU (-1)

/* Acquire: make `device`'s replica of the managed mappings overlapping
 * [addr, addr+len) current. For the CPU: learn the pages other processes
 * changed since the last acquire (from the shared version table, and, for
 * writers not under the shim, from file times and page checksums, first
 * taken at the first gaia_macquire or before a device first holds a copy
 * of the mapping: changes before that move no version); their versions
 * move. For a device: first the CPU's
 * acquire, then the device's copy of those mappings (and of any it holds)
 * is brought up to date as at a kernel launch, its replica made if it has
 * none; a kernel launched afterwards on it finds nothing to upload. */
int gaia_macquire(void *addr, size_t len, int device);

/* Release: publish `device`'s writes to the managed mappings overlapping
 * [addr, addr+len) (for the CPU: collect the pages written since the last
 * release, give them new versions and publish them). For a device: waits
 * for the kernels launched on it (as cudaDeviceSynchronize would, on the
 * streams the shim saw them launched on) and merges what it wrote into
 * the CPU's pages, for every mapping the device holds, not only the range
 * (a device's writes are found by diffing its whole copy). */
int gaia_mrelease(void *addr, size_t len, int device);

/* The CPU replica's version of each page of [addr, addr+len): one entry per
 * 4 KiB page; 0 for pages outside any managed mapping. Versions change only
 * at releases, so a page whose version moved was written in between. */
int gaia_mversion(const void *addr, size_t len, uint32_t *versions);

#ifdef __cplusplus
}
#endif

#endif
