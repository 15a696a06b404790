/* The explicit calls of include/gaia.h. */
#include <errno.h>

#include "gaia.h"
#include "shim.h"

#define GAIA_EXPORT __attribute__((visibility("default")))

static int check_range(const void *addr, size_t len, int device)
{
	if (((uintptr_t)addr & (GAIA_PAGE - 1)) || !len)
		return -EINVAL;
	if (device != GAIA_CPU && (device < 0 || !gpu_device_acquire))
		return -ENODEV; /* not a device, or a shim built without CUDA */
	return mapping_overlaps(addr, len) ? 0 : -ENOENT;
}

static int to_libc(int rc)
{
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return 0;
}

GAIA_EXPORT int gaia_macquire(void *addr, size_t len, int device)
{
	/* The CPU replica is the page cache: other processes' changes are
	 * already there. What moves are versions: the pages they published
	 * since the last acquire become newer here (devices will fetch them). */
	int rc = check_range(addr, len, device);
	if (!rc) {
		gaia_in_shim++;
		rc = mapping_acquire_range(addr, len);
		gaia_in_shim--;
		if (!rc && device != GAIA_CPU)
			rc = gpu_device_acquire(device, addr, len);
	}
	return to_libc(rc);
}

GAIA_EXPORT int gaia_mrelease(void *addr, size_t len, int device)
{
	int rc = check_range(addr, len, device);
	if (!rc) {
		gaia_in_shim++;
		rc = device == GAIA_CPU ? mapping_release_range(addr, len) : 0;
		gaia_in_shim--;
		if (!rc && device != GAIA_CPU)
			rc = gpu_device_release(device);
	}
	return to_libc(rc);
}

GAIA_EXPORT int gaia_mversion(const void *addr, size_t len, uint32_t *versions)
{
	if (!versions)
		return to_libc(-EINVAL);
	return to_libc(mapping_versions(addr, len, versions));
}
