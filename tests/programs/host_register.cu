/* host_register — page-locking an mmap'ed file range with cudaHostRegister
 * and using it as the host side of cudaMemcpyAsync on a stream:
 *   the pointer's attributes before registering are those of any other
 *   unregistered host memory (an anonymous mapping of the same size);
 *   register, H2D and D2H cudaMemcpyAsync + cudaStreamSynchronize, check
 *   the device bytes, the mapping and pread(); unregister;
 *   a kernel then reads and writes the range; after a sync the range is
 *   registered again and copied to the device: the copy carries the
 *   kernel's bytes.
 * The simulated runtime has no cudaPointerGetAttributes (it is used where
 * the runtime has it); the driver's cuPointerGetAttribute(s) always.
 */
#include <dlfcn.h>
#include <stdint.h>

#include <cuda.h>

#include "programs.h"
#include "patterns.h"

#define NB (32 * PAGE)

static void is_pat(const char *what, const unsigned char *got, int k)
{
	static unsigned char want[NB];
	fill(want, 0, NB, k);
	same(what, got, want, NB);
}

static void device_is_pat(const char *what, const unsigned char *dev, int k)
{
	unsigned char *buf = (unsigned char *)malloc(NB);
	CUDA_OK(cudaMemcpy(buf, dev, NB, cudaMemcpyDeviceToHost));
	is_pat(what, buf, k);
	free(buf);
}

static void file_is_pat(const char *what, int fd, const unsigned char *m, int k)
{
	char msg[200];
	snprintf(msg, sizeof(msg), "%s, through the mapping", what);
	is_pat(msg, m, k);
	unsigned char *buf = (unsigned char *)malloc(NB);
	pread_all(fd, buf, NB, 0);
	snprintf(msg, sizeof(msg), "%s, read with pread()", what);
	is_pat(msg, buf, k);
	free(buf);
}

/* What the driver and runtime say about a pointer. */
struct attrs {
	CUresult type_rc;		/* cuPointerGetAttribute(MEMORY_TYPE) */
	unsigned type;
	unsigned plural_type;		/* cuPointerGetAttributes */
	int plural_managed;
	CUresult plural_rc;
	int have_rt;			/* cudaPointerGetAttributes, where the runtime has it */
	cudaError_t rt_rc;
	int rt_type;
};

static struct attrs attrs_of(const void *p)
{
	struct attrs a;
	memset(&a, 0, sizeof(a));
	a.type_rc = cuPointerGetAttribute(&a.type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p);
	CUpointer_attribute which[2] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED };
	void *data[2] = { &a.plural_type, &a.plural_managed };
	a.plural_rc = cuPointerGetAttributes(2, which, data, (CUdeviceptr)(uintptr_t)p);
	typedef cudaError_t (*fn_t)(cudaPointerAttributes *, const void *);
	fn_t rt = (fn_t)dlsym(RTLD_DEFAULT, "cudaPointerGetAttributes");
	if (rt) {
		cudaPointerAttributes pa;
		memset(&pa, 0, sizeof(pa));
		a.have_rt = 1;
		a.rt_rc = rt(&pa, p);
		a.rt_type = (int)pa.type;
		(void)cudaGetLastError();
	}
	return a;
}

static void same_attrs(const char *what, const void *p, const void *like)
{
	struct attrs a = attrs_of(p), b = attrs_of(like);
	CHECK(a.type_rc == b.type_rc && (a.type_rc != CUDA_SUCCESS || a.type == b.type),
	      "%s: cuPointerGetAttribute(MEMORY_TYPE) answers %d (type %u) for the mapping, %d (type %u) for "
	      "other memory of that kind", what, (int)a.type_rc, a.type, (int)b.type_rc, b.type);
	CHECK(a.plural_rc == b.plural_rc && a.plural_type == b.plural_type && a.plural_managed == b.plural_managed,
	      "%s: cuPointerGetAttributes answers %d (type %u, managed %d) for the mapping, %d (type %u, managed %d) "
	      "for other memory of that kind", what, (int)a.plural_rc, a.plural_type, a.plural_managed,
	      (int)b.plural_rc, b.plural_type, b.plural_managed);
	CHECK(a.have_rt == b.have_rt && a.rt_rc == b.rt_rc && a.rt_type == b.rt_type,
	      "%s: cudaPointerGetAttributes answers %d (type %d) for the mapping, %d (type %d) for other memory",
	      what, (int)a.rt_rc, a.rt_type, (int)b.rt_rc, b.rt_type);
}

int main(void)
{
	watchdog(60);
	CUDA_OK(cudaSetDevice(0));
	int fd = make_file(NB, NULL);
	unsigned char *m = (unsigned char *)map_file(fd, NB);
	unsigned char *anon = (unsigned char *)mmap(NULL, NB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(anon != MAP_FAILED, "mmap anonymous: %s", strerror(errno));
	unsigned char *d, *d2;
	CUDA_OK(cudaMalloc((void **)&d, NB));
	CUDA_OK(cudaMalloc((void **)&d2, NB));
	unsigned char *h = (unsigned char *)malloc(NB);
	cudaStream_t s;
	CUDA_OK(cudaStreamCreate(&s));

	step = "pointer attributes before registering";
	fill(m, 0, NB, 1);
	same_attrs("before cudaHostRegister", m, anon);

	step = "cudaHostRegister + cudaMemcpyAsync H2D from the mapping";
	CUDA_OK(cudaHostRegister(m, NB, cudaHostRegisterDefault));
	CUDA_OK(cudaHostRegister(anon, NB, cudaHostRegisterDefault));
	same_attrs("while registered", m, anon);
	CUDA_OK(cudaMemcpyAsync(d, m, NB, cudaMemcpyHostToDevice, s));
	CUDA_OK(cudaStreamSynchronize(s));
	device_is_pat("device buffer after cudaMemcpyAsync H2D from the registered mapping", d, 1);

	step = "cudaMemcpyAsync D2H into the registered mapping";
	fill(h, 0, NB, 2);
	CUDA_OK(cudaMemcpy(d, h, NB, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpyAsync(m, d, NB, cudaMemcpyDeviceToHost, s));
	CUDA_OK(cudaStreamSynchronize(s));
	file_is_pat("after cudaMemcpyAsync D2H into the registered mapping", fd, m, 2);
	CUDA_OK(cudaHostUnregister(m));
	CUDA_OK(cudaHostUnregister(anon));
	same_attrs("after cudaHostUnregister", m, anon);

	step = "a kernel reading the mapping after cudaHostUnregister";
	SIMGPU_LAUNCH(copy_bytes, 16, 256, 0, s)(m, d2, (unsigned long long)NB);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaStreamSynchronize(s));
	device_is_pat("what a kernel read from the mapping after the D2H copy", d2, 2);

	step = "a kernel writing the mapping, then cudaHostRegister and cudaMemcpyAsync H2D";
	SIMGPU_LAUNCH(fill_pat, 16, 256, 0, s)(m, 0ull, (unsigned long long)NB, 3);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaStreamSynchronize(s));
	file_is_pat("after a kernel wrote the mapping", fd, m, 3);
	CUDA_OK(cudaHostRegister(m, NB, cudaHostRegisterDefault));
	CUDA_OK(cudaMemcpyAsync(d, m, NB, cudaMemcpyHostToDevice, s));
	CUDA_OK(cudaStreamSynchronize(s));
	device_is_pat("cudaMemcpyAsync H2D from the mapping registered again after a kernel wrote it", d, 3);
	fill(h, 0, NB, 4);
	CUDA_OK(cudaMemcpy(d, h, NB, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpyAsync(m, d, NB, cudaMemcpyDeviceToHost, s));
	CUDA_OK(cudaStreamSynchronize(s));
	file_is_pat("cudaMemcpyAsync D2H into the mapping registered again", fd, m, 4);
	CUDA_OK(cudaHostUnregister(m));

	CUDA_OK(cudaStreamDestroy(s));
	CUDA_OK(cudaFree(d));
	CUDA_OK(cudaFree(d2));
	free(h);
	printf("ok host_register\n");
	return 0;
}
