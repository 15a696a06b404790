/*
 * registry.c — kernels known to the simulator, keyed by their host address
 * (which is also their address in the device processes, forked from this
 * image).  Registration happens in static constructors, before or after
 * cuInit; only kernels registered before the devices were forked are sure
 * to exist in the device processes, so later ones are refused at launch.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct entry {
    const struct simgpu_kernel_desc *desc;
    bool launchable;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry *entries;
static size_t nentries, capentries;
static bool sealed;

__attribute__((visibility("default")))
int simgpu_register_kernel(const struct simgpu_kernel_desc *desc)
{
    if (!desc || desc->abi != SIMGPU_KERNEL_ABI || !desc->func || !desc->trampoline == !desc->thread ||
        desc->nparams > SIMGPU_MAX_KERNEL_PARAMS || desc->args_bytes > SIMGPU_MAX_ARGS_BYTES)
        return -EINVAL;
    pthread_mutex_lock(&registry_lock);
    int rc = 0;
    if (nentries == capentries) {
        size_t cap = capentries ? capentries * 2 : 32;
        struct entry *e = realloc(entries, cap * sizeof(*e));
        if (!e) {
            rc = -ENOMEM;
            goto out;
        }
        entries = e;
        capentries = cap;
    }
    entries[nentries++] = (struct entry){ desc, !sealed };
out:
    pthread_mutex_unlock(&registry_lock);
    return rc;
}

void sim_registry_seal(void)
{
    pthread_mutex_lock(&registry_lock);
    sealed = true;
    pthread_mutex_unlock(&registry_lock);
}

/* Most recent registration wins (a module registered twice, e.g. dlopened
 * again, keeps working).  Non-launchable kernels are reported once. */
const struct simgpu_kernel_desc *sim_kernel_find(const void *func)
{
    const struct simgpu_kernel_desc *found = NULL;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = nentries; i-- > 0;) {
        if (entries[i].desc->func == func) {
            if (entries[i].launchable)
                found = entries[i].desc;
            else
                sim_log("kernel %s was registered after cuInit; the device processes do not have its code",
                        entries[i].desc->name);
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    return found;
}

const struct simgpu_kernel_desc *sim_kernel_of_handle(const void *handle)
{
    const struct simgpu_kernel_desc *found = NULL;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = nentries; i-- > 0;) {
        if ((const void *)entries[i].desc == handle) {
            if (entries[i].launchable)
                found = entries[i].desc;
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    return found;
}

/* The CUkernel the runtime launches a kernel with, as cudart 12 and 13
 * do (cuLibraryGetKernel there): not the host stub's address, so a
 * driver call that takes only CUfunctions refuses it as the real driver
 * does (cuFuncGetParamInfo: CUDA_ERROR_INVALID_HANDLE). NULL for a
 * function that is not a registered kernel. */
void *simgpu_kernel_handle(const void *stub)
{
    const struct simgpu_kernel_desc *k = sim_kernel_find(stub);
    return k ? (void *)(uintptr_t)k : NULL;
}

/* Does `name` denote the kernel registered as `source`?  Either the source
 * name itself or the Itanium mangling of a free function of that name,
 * _Z<len><source><parameter types> (what nvcc puts in PTX .entry lines for
 * kernels that are not extern "C"). */
static bool name_matches(const char *name, const char *source)
{
    if (strcmp(name, source) == 0)
        return true;
    if (strncmp(name, "_Z", 2) != 0)
        return false;
    char *end;
    unsigned long len = strtoul(name + 2, &end, 10);
    return end != name + 2 && len == strlen(source) && strncmp(end, source, len) == 0;
}

const struct simgpu_kernel_desc *sim_kernel_find_by_name(const char *name)
{
    const struct simgpu_kernel_desc *found = NULL;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = nentries; i-- > 0;) {
        if (entries[i].desc->name && name_matches(name, entries[i].desc->name)) {
            found = entries[i].desc;
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    return found;
}
