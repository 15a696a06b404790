# Thin wrapper over CMake: the targets a person types.
#   make            build everything into build/
#   make demo       build and run the main demo
#   make test       build and run every test (CTest)
#   make test-asan  every test under ASan+UBSan; make test-tsan under TSan
#   make bench      run every benchmark
#   make bench-engine   the engine benchmarks (merge, versions, release/acquire)
#   make bench-cpu      the preloaded shim against the kernel alone (installs fio)
# Missing Debian packages are installed when run as root; otherwise the
# exact apt-get line is printed.

BUILD      ?= build
CMAKE_ARGS ?=
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
DEB_PACKAGES := cmake make gcc g++ pkg-config libcmocka-dev libunwind-dev libxxhash-dev

.PHONY: all deps configure demo test test-asan test-tsan bench bench-engine bench-cpu clean

all: configure
	cmake --build $(BUILD) -j $(JOBS)

# $(call install-debs,PACKAGES,required|optional): installs the missing
# packages as root; otherwise prints the apt-get line. A required package
# that cannot be had stops make; an optional one only says so.
define install-debs
	@missing=""; \
	for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; }; then \
	      echo "could not install:$$missing"; [ "$(2)" = optional ] || exit 1; \
	    fi; \
	  else \
	    echo "missing Debian packages; run:"; \
	    echo "  sudo apt-get install -y$$missing"; \
	    [ "$(2)" = optional ] || exit 1; \
	  fi; \
	fi
endef

deps:
	$(call install-debs,$(DEB_PACKAGES),required)

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CMAKE_ARGS)

demo: bench-engine

test: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The whole suite under ASan+UBSan, and under TSan, each in its own build.
test-asan: deps
	@test -f build-asan/CMakeCache.txt || cmake -S . -B build-asan -DGAIA_SANITIZE=address $(CMAKE_ARGS)
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS)

test-tsan: deps
	@test -f build-tsan/CMakeCache.txt || cmake -S . -B build-tsan -DGAIA_SANITIZE=thread $(CMAKE_ARGS)
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && ctest --output-on-failure -j $(JOBS)

bench: bench-engine bench-cpu

bench-engine: all
	$(BUILD)/bench/bench_merge
	$(BUILD)/bench/bench_lrc

# fio is only for the unmanaged-I/O row: without it bench_cpu skips that row.
bench-cpu: all
	$(call install-debs,fio,optional)
	$(BUILD)/bench/bench_cpu --lib $(BUILD)/libgaia.so

clean:
	rm -rf $(BUILD)
