/* plain_check.h — the checks of the plain (non-CMocka) test programs: they
 * take SIGSEGV themselves (managed memory, kernel faults), which a test
 * framework's own handler would take for crashes.  Exit 0 pass, 1 fail. */
#ifndef SIMGPU_TEST_PLAIN_CHECK_H
#define SIMGPU_TEST_PLAIN_CHECK_H

#include <cstdio>

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            std::fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);       \
            return 1;                                                                  \
        }                                                                              \
    } while (0)
#define CU(call) CHECK((call) == CUDA_SUCCESS)

#endif
