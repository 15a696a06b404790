/*
 * array.c — CUDA arrays: opaque handles over device memory, as a program
 * allocates them for textures and surfaces (cuArrayCreate, cuArray3DCreate,
 * cuMipmappedArrayCreate, and cudart's cudaMallocArray family over them).
 *
 * The simulator has no texture units: an array is its elements laid out
 * row after row (a row's bytes rounded up to 512, as pitched allocations
 * are), planes after planes, in device memory taken like cuMemAlloc's
 * (so it counts against the device and fails with out of memory as an
 * allocation does). 2-D and 3-D copies reach it (CU_MEMORYTYPE_ARRAY,
 * sim_array_side); kernels cannot. The element formats are those of a
 * fixed size (8/16/32-bit integers, half, float, and the normalized
 * ones); block-compressed and YUV formats are refused with
 * CUDA_ERROR_NOT_SUPPORTED.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define ARRAY_MAGIC 0x61727279u   /* "arry" */
#define MIPMAP_MAGIC 0x6d69706du  /* "mipm" */
#define MAX_LEVELS 32u

struct CUarray_st {
    uint32_t magic;
    CUDA_ARRAY3D_DESCRIPTOR desc;
    CUdeviceptr mem;
    size_t pitch, rows, planes;  /* bytes a row, rows a plane, planes */
    size_t row_bytes;            /* the elements' bytes in a row */
    struct CUmipmappedArray_st *level_of;   /* a mipmap's level: freed with it */
    struct CUarray_st *next;
};

struct CUmipmappedArray_st {
    uint32_t magic;
    unsigned levels;
    CUdeviceptr mem;
    struct CUarray_st *level[MAX_LEVELS];
    struct CUmipmappedArray_st *next;
};

static pthread_mutex_t arrays_lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUarray_st *arrays;
static struct CUmipmappedArray_st *mipmaps;

/* Bytes per element, or 0 for a format the simulator does not lay out. */
static size_t element_bytes(CUarray_format f, unsigned channels)
{
    size_t b;
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        b = 1;
        break;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        b = 2;
        break;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        b = 4;
        break;
    /* the normalized ones name their channels */
    case CU_AD_FORMAT_UNORM_INT8X1:
    case CU_AD_FORMAT_SNORM_INT8X1:
        return channels == 1 ? 1 : 0;
    case CU_AD_FORMAT_UNORM_INT8X2:
    case CU_AD_FORMAT_SNORM_INT8X2:
    case CU_AD_FORMAT_UNORM_INT16X1:
    case CU_AD_FORMAT_SNORM_INT16X1:
        return channels == 1 || channels == 2 ? (size_t)2 : 0;
    case CU_AD_FORMAT_UNORM_INT8X4:
    case CU_AD_FORMAT_SNORM_INT8X4:
    case CU_AD_FORMAT_UNORM_INT16X2:
    case CU_AD_FORMAT_SNORM_INT16X2:
        return channels == 1 || channels == 4 || channels == 2 ? (size_t)4 : 0;
    case CU_AD_FORMAT_UNORM_INT16X4:
    case CU_AD_FORMAT_SNORM_INT16X4:
        return 8;
    default:
        return 0;
    }
    return channels == 1 || channels == 2 || channels == 4 ? b * channels : 0;
}

/* Checks d and lays one array out: bytes a row, rows a plane, planes. */
static CUresult layout(const CUDA_ARRAY3D_DESCRIPTOR *d, size_t *pitch, size_t *rows, size_t *planes,
                       size_t *row_bytes)
{
    if (!d || d->Width == 0 || (d->Depth && !d->Height && !(d->Flags & CUDA_ARRAY3D_LAYERED)) ||
        ((d->Flags & CUDA_ARRAY3D_LAYERED) && !d->Depth))
        return CUDA_ERROR_INVALID_VALUE;
    /* the extents of compute capability 9.0 (CUDA C++ Programming Guide,
     * "Technical Specifications per Compute Capability"): 1-D and 2-D
     * 131072 wide, 2-D 65536 high, 3-D 16384 each way, layers 2048 */
    bool layered = d->Flags & CUDA_ARRAY3D_LAYERED, three_d = d->Depth && !layered;
    if ((three_d && (d->Width > 16384 || d->Height > 16384 || d->Depth > 16384)) ||
        (!three_d && (d->Width > 131072 || d->Height > 65536)) || (layered && d->Depth > 2048 * 6))
        return CUDA_ERROR_INVALID_VALUE;
    if ((d->Flags & CUDA_ARRAY3D_TEXTURE_GATHER) && d->Depth)
        return CUDA_ERROR_INVALID_VALUE;  /* gather: 2-D arrays only */
    if (d->Flags & ~(unsigned)(CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_CUBEMAP |
                               CUDA_ARRAY3D_TEXTURE_GATHER))
        return CUDA_ERROR_NOT_SUPPORTED;
    if ((d->Flags & CUDA_ARRAY3D_CUBEMAP) &&
        (d->Width != d->Height || (d->Flags & CUDA_ARRAY3D_LAYERED ? d->Depth % 6 : d->Depth != 6)))
        return CUDA_ERROR_INVALID_VALUE;
    if (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4)
        return CUDA_ERROR_INVALID_VALUE;
    size_t e = element_bytes(d->Format, d->NumChannels);
    if (!e)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (d->Width > SIZE_MAX / e - 511)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *row_bytes = d->Width * e;
    *pitch = (d->Width * e + 511) & ~(size_t)511;
    *rows = d->Height ? d->Height : 1;
    *planes = d->Depth ? d->Depth : 1;
    return CUDA_SUCCESS;
}

static CUresult bytes_of(size_t pitch, size_t rows, size_t planes, size_t *out)
{
    if (rows > SIZE_MAX / pitch || planes > SIZE_MAX / (pitch * rows))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *out = pitch * rows * planes;
    return CUDA_SUCCESS;
}

/* Under arrays_lock: h is a live array. */
static bool live_array(const struct CUarray_st *h)
{
    for (const struct CUarray_st *a = arrays; a; a = a->next)
        if (a == h)
            return a->magic == ARRAY_MAGIC;
    return false;
}

static void link_array(struct CUarray_st *a)
{
    a->magic = ARRAY_MAGIC;
    a->next = arrays;
    arrays = a;
}

static void unlink_array(struct CUarray_st *h)
{
    for (struct CUarray_st **p = &arrays; *p; p = &(*p)->next)
        if (*p == h) {
            *p = h->next;
            h->magic = 0;
            return;
        }
}

CUresult CUDAAPI cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    size_t pitch, rows, planes, row_bytes, bytes;
    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = layout(d, &pitch, &rows, &planes, &row_bytes)) != CUDA_SUCCESS ||
        (r = bytes_of(pitch, rows, planes, &bytes)) != CUDA_SUCCESS)
        return r;
    struct CUarray_st *a = calloc(1, sizeof(*a));
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if ((r = cuMemAlloc_v2(&a->mem, bytes)) != CUDA_SUCCESS) {
        free(a);
        return r;
    }
    a->desc = *d;
    a->pitch = pitch;
    a->rows = rows;
    a->planes = planes;
    a->row_bytes = row_bytes;
    pthread_mutex_lock(&arrays_lock);
    link_array(a);
    pthread_mutex_unlock(&arrays_lock);
    *pHandle = a;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d3 = { .Width = d->Width, .Height = d->Height, .Depth = 0,
                                   .Format = d->Format, .NumChannels = d->NumChannels, .Flags = 0 };
    return cuArray3DCreate_v2(pHandle, &d3);
}

CUresult CUDAAPI cuArrayDestroy(CUarray hArray)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&arrays_lock);
    if (!live_array(hArray) || hArray->level_of) {
        pthread_mutex_unlock(&arrays_lock);
        return CUDA_ERROR_INVALID_HANDLE;  /* a mipmap's level goes with its mipmap */
    }
    unlink_array(hArray);
    pthread_mutex_unlock(&arrays_lock);
    r = cuMemFree_v2(hArray->mem);
    free(hArray);
    return r;
}

CUresult CUDAAPI cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *out, CUarray hArray)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&arrays_lock);
    bool ok = live_array(hArray);
    if (ok)
        *out = hArray->desc;
    pthread_mutex_unlock(&arrays_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *out, CUarray hArray)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = cuArray3DGetDescriptor_v2(&d, hArray);
    if (r != CUDA_SUCCESS)
        return r;
    if (d.Depth)
        return CUDA_ERROR_INVALID_VALUE;  /* cuda.h: a 3-D array has no 2-D descriptor */
    *out = (CUDA_ARRAY_DESCRIPTOR){ .Width = d.Width, .Height = d.Height, .Format = d.Format,
                                    .NumChannels = d.NumChannels };
    return CUDA_SUCCESS;
}

static size_t halve(size_t n)
{
    return n > 1 ? n / 2 : n;
}

CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                        unsigned int numMipmapLevels)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pHandle || !d || numMipmapLevels == 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* cuda.h: clamped to [1, 1 + floor(log2(max(width, height, depth)))] */
    size_t longest = d->Width > d->Height ? d->Width : d->Height;
    if (!(d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) && d->Depth > longest)
        longest = d->Depth;
    unsigned most = 1;
    while (longest >> most && most < MAX_LEVELS)
        most++;
    if (numMipmapLevels > most)
        numMipmapLevels = most;
    struct CUmipmappedArray_st *mm = calloc(1, sizeof(*mm));
    if (!mm)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* Level l halves each extent of level l-1 (layers and cube faces
     * stay); one allocation holds them all. */
    CUDA_ARRAY3D_DESCRIPTOR ld = *d;
    size_t at[MAX_LEVELS], total = 0;
    bool keep_depth = (d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
    for (unsigned l = 0; l < numMipmapLevels && r == CUDA_SUCCESS; l++) {
        size_t pitch, rows, planes, row_bytes, bytes;
        if ((r = layout(&ld, &pitch, &rows, &planes, &row_bytes)) != CUDA_SUCCESS ||
            (r = bytes_of(pitch, rows, planes, &bytes)) != CUDA_SUCCESS)
            break;
        struct CUarray_st *a = calloc(1, sizeof(*a));
        if (!a || total > SIZE_MAX - bytes) {
            free(a);
            r = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        a->desc = ld;
        a->pitch = pitch;
        a->rows = rows;
        a->planes = planes;
        a->row_bytes = row_bytes;
        a->level_of = mm;
        mm->level[mm->levels++] = a;
        at[l] = total;
        total += bytes;
        ld.Width = halve(ld.Width);
        ld.Height = halve(ld.Height);
        if (!keep_depth)
            ld.Depth = halve(ld.Depth);
    }
    if (r == CUDA_SUCCESS)
        r = cuMemAlloc_v2(&mm->mem, total);
    if (r != CUDA_SUCCESS) {
        for (unsigned l = 0; l < mm->levels; l++)
            free(mm->level[l]);
        free(mm);
        return r;
    }
    pthread_mutex_lock(&arrays_lock);
    for (unsigned l = 0; l < mm->levels; l++) {
        mm->level[l]->mem = mm->mem + at[l];
        link_array(mm->level[l]);
    }
    mm->magic = MIPMAP_MAGIC;
    mm->next = mipmaps;
    mipmaps = mm;
    pthread_mutex_unlock(&arrays_lock);
    *pHandle = mm;
    return CUDA_SUCCESS;
}

/* Under arrays_lock. */
static bool live_mipmap(const struct CUmipmappedArray_st *h)
{
    for (const struct CUmipmappedArray_st *m = mipmaps; m; m = m->next)
        if (m == h)
            return m->magic == MIPMAP_MAGIC;
    return false;
}

CUresult CUDAAPI cuMipmappedArrayGetLevel(CUarray *pLevelArray, CUmipmappedArray h, unsigned int level)
{
    if (!pLevelArray)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&arrays_lock);
    CUresult r = !live_mipmap(h) ? CUDA_ERROR_INVALID_HANDLE
               : level >= h->levels ? CUDA_ERROR_INVALID_VALUE
                                    : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS)
        *pLevelArray = h->level[level];
    pthread_mutex_unlock(&arrays_lock);
    return r;
}

CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray h)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&arrays_lock);
    if (!live_mipmap(h)) {
        pthread_mutex_unlock(&arrays_lock);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    for (struct CUmipmappedArray_st **p = &mipmaps; *p; p = &(*p)->next)
        if (*p == h) {
            *p = h->next;
            break;
        }
    h->magic = 0;
    for (unsigned l = 0; l < h->levels; l++)
        unlink_array(h->level[l]);
    pthread_mutex_unlock(&arrays_lock);
    r = cuMemFree_v2(h->mem);
    for (unsigned l = 0; l < h->levels; l++)
        free(h->level[l]);
    free(h);
    return r;
}

CUresult sim_array_side(CUarray h, struct sim_array_layout *out)
{
    pthread_mutex_lock(&arrays_lock);
    bool ok = live_array(h);
    if (ok)
        *out = (struct sim_array_layout){ .base = h->mem, .pitch = h->pitch, .rows = h->rows,
                                          .planes = h->planes, .row_bytes = h->row_bytes };
    pthread_mutex_unlock(&arrays_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
