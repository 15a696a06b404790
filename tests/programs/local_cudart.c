/* local_cudart — a plain C program that loads a CUDA plugin
 * (liblocal_cudart_lib.so, linked with libcudart) with
 * dlopen(RTLD_LOCAL) and runs it: the plugin's runtime-API launches with
 * mapped pointers must reach the device as they do in a program linked
 * with libcudart itself. The plugin's path is the first argument. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]);
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "FAIL: dlopen %s: %s\n", argv[1], dlerror());
		return 1;
	}
	int (*run)(void);
	*(void **)&run = dlsym(h, "run_local");
	if (!run) {
		fprintf(stderr, "FAIL: no run_local in %s: %s\n", argv[1], dlerror());
		return 1;
	}
	/* The point of the test: the runtime is out of the global scope. */
	if (dlsym(RTLD_DEFAULT, "cudaFuncGetParamInfo")) {
		fprintf(stderr, "FAIL: libcudart is in the global scope; the test needs it local\n");
		return 1;
	}
	int rc = run();
	if (rc == 0)
		printf("local_cudart: ok\n");
	return rc;
}
