/*
 * module.c — cuModuleLoadData[Ex], cuModuleGetFunction, cuModuleUnload for
 * kernels the simulator knows by name.
 *
 * The simulator cannot execute PTX or SASS.  A module is a view of the
 * kernel registry (registry.c): cuModuleGetFunction looks the name up there
 * and returns the registered kernel's CUfunction, which launches like any
 * other.  When the image is PTX text, only the names it declares with
 * `.visible .entry NAME(` may be looked up, so a module does not hand out
 * kernels it does not contain; a binary image (cubin ELF, fatbin) cannot be
 * read here, so any registered name resolves.  Module handles are kept in
 * a list: a stale or foreign handle is CUDA_ERROR_INVALID_HANDLE, never a
 * read of freed memory.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct sim_module {
    struct sim_module *next;
    bool ptx;                   /* text image: `entries` limits the names */
    size_t nentries;
    char **entries;             /* `.visible .entry` names of the PTX */
};

static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_module *modules;

/* Byte by byte, so a short NUL-terminated PTX string is never read past
 * its end (none of the magic bytes is 0). */
static bool starts_with(const unsigned char *img, const unsigned char magic[4])
{
    for (int i = 0; i < 4; i++)
        if (img[i] != magic[i])
            return false;
    return true;
}

static bool is_binary_image(const unsigned char *img)
{
    static const unsigned char elf[4] = { 0x7f, 'E', 'L', 'F' };
    static const unsigned char fatbin[4] = { 0x50, 0xed, 0x55, 0xba };   /* 0xBA55ED50 LE: fatbin header */
    static const unsigned char wrapper[4] = { 0xb1, 0x43, 0x62, 0x46 };  /* 0x466243B1 LE: __fatBinC_Wrapper_t */
    return starts_with(img, elf) || starts_with(img, fatbin) || starts_with(img, wrapper);
}

static void module_free(struct sim_module *m)
{
    for (size_t i = 0; i < m->nentries; i++)
        free(m->entries[i]);
    free(m->entries);
    free(m);
}

static bool is_ident(int c)
{
    return isalnum(c) || c == '_' || c == '$';
}

/* Collect every `.visible .entry NAME(` (whitespace allowed between the
 * tokens and before the parenthesis; PTX ISA, "Kernel function
 * declarations").  Returns 0 or -ENOMEM. */
static int parse_ptx_entries(struct sim_module *m, const char *ptx)
{
    size_t cap = 0;
    for (const char *p = strstr(ptx, ".visible"); p; p = strstr(p + 1, ".visible")) {
        const char *q = p + strlen(".visible");
        if (!isspace((unsigned char)*q))
            continue;
        while (isspace((unsigned char)*q))
            q++;
        if (strncmp(q, ".entry", 6) != 0 || !isspace((unsigned char)q[6]))
            continue;
        q += 6;
        while (isspace((unsigned char)*q))
            q++;
        const char *name = q;
        while (is_ident((unsigned char)*q))
            q++;
        size_t len = (size_t)(q - name);
        while (isspace((unsigned char)*q))
            q++;
        if (len == 0 || *q != '(')
            continue;
        if (m->nentries == cap) {
            cap = cap ? cap * 2 : 8;
            char **v = realloc(m->entries, cap * sizeof(*v));
            if (!v)
                return -ENOMEM;
            m->entries = v;
        }
        if (!(m->entries[m->nentries] = strndup(name, len)))
            return -ENOMEM;
        m->nentries++;
    }
    return 0;
}

static CUresult load(CUmodule *module, const void *image)
{
    struct sim_device *d;
    CUresult r = sim_current_device(&d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_module *m = calloc(1, sizeof(*m));
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->ptx = !is_binary_image(image);
    if (m->ptx && parse_ptx_entries(m, image) != 0) {
        module_free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&modules_lock);
    m->next = modules;
    modules = m;
    pthread_mutex_unlock(&modules_lock);
    *module = (CUmodule)m;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
    return load(module, image);
}

/* JIT options are accepted and ignored: nothing is compiled. */
CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                    CUjit_option *options, void **optionValues)
{
    if (numOptions && (!options || !optionValues))
        return CUDA_ERROR_INVALID_VALUE;
    return load(module, image);
}

/* Unlinks m if it is a live module; the caller owns it then. */
static bool module_unlink(struct sim_module *m)
{
    bool found = false;
    pthread_mutex_lock(&modules_lock);
    for (struct sim_module **pp = &modules; *pp; pp = &(*pp)->next) {
        if (*pp == m) {
            *pp = m->next;
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&modules_lock);
    return found;
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_module *m = (struct sim_module *)hmod;
    if (!m || !module_unlink(m))
        return CUDA_ERROR_INVALID_HANDLE;
    module_free(m);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_module *m = (struct sim_module *)hmod;
    r = CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&modules_lock);
    for (struct sim_module *it = modules; it; it = it->next) {
        if (it != m)
            continue;
        r = CUDA_ERROR_NOT_FOUND;
        bool declared = !m->ptx;
        for (size_t i = 0; !declared && i < m->nentries; i++)
            declared = strcmp(m->entries[i], name) == 0;
        const struct simgpu_kernel_desc *k = declared ? sim_kernel_find_by_name(name) : NULL;
        if (k) {
            *hfunc = (CUfunction)(uintptr_t)k->func;
            r = CUDA_SUCCESS;
        }
        break;
    }
    pthread_mutex_unlock(&modules_lock);
    return r;
}

/* Module globals would live in device memory initialised from the image,
 * which the simulator cannot read. */
CUresult CUDAAPI cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
    (void)dptr, (void)bytes, (void)hmod, (void)name;
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr_v1 *dptr, unsigned int *bytes, CUmodule hmod, const char *name)
{
    (void)dptr, (void)bytes, (void)hmod, (void)name;
    return CUDA_ERROR_NOT_SUPPORTED;
}
