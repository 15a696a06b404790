# Thin wrapper over CMake: the targets a person types.
#   make            build everything into build/
#   make demo       build and run the main demo
#   make test       build and run every test (CTest)
#   make hwcheck    the hardware checks, one table (build/hwcheck.md); on the
#                   simulated GPU when no GPU is found
#   make hwtest     every CUDA program under the shim and the workloads in every
#                   mode, one table (build/hwtest.md); simulated GPU likewise
#   make test-asan  every test under ASan+UBSan; make test-tsan under TSan
#   make soak       the stress tests for SOAK_SECONDS (600) and SOAK_KILL9_TRIALS
#                   (5000) kill -9 trials of each crash test, in build/
#   make bench      run every benchmark
#   make bench-engine   the engine benchmarks (merge, versions, release/acquire)
#   make bench-cpu      the preloaded shim against the kernel alone (installs fio)
#   make bench-gpu      launches and syncs under the shim on the simulated GPU
#   make bench-peer     peer caching: preads served from a device vs storage (gnuplot)
#   make bench-stream   a kernel streams a file 0.5x and 4x device memory: copy, managed, gaia (gnuplot)
#   make bench-gunrock  dynamic-graph SSSP sweep (workloads/gunrock; gnuplot for the plot)
#   make bench-mosaic   image collage and stitching in every mode (workloads/mosaic; gnuplot)
#   make install    build, then install under PREFIX (/usr/local), staged in
#                   DESTDIR when given; make uninstall removes what it installed
# Missing Debian packages are installed when run as root; otherwise the
# exact apt-get line is printed.

BUILD      ?= build
CMAKE_ARGS ?=
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
DEB_PACKAGES := cmake make gcc g++ pkg-config libcmocka-dev libunwind-dev libxxhash-dev libpng-dev
# Programs the tests run under the shim (tests/apps): without them those
# tests skip, saying what to install.
TEST_DEB_PACKAGES := git python3

.PHONY: all deps configure demo test test-asan test-tsan soak bench bench-engine bench-cpu bench-gpu bench-peer bench-stream bench-gunrock bench-mosaic install uninstall clean

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
	$(call install-debs,$(TEST_DEB_PACKAGES),optional)

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CMAKE_ARGS)

# An ordinary CUDA program on an mmap'ed file, run under the shim: on a
# real GPU when nvidia-smi finds one (the nvcc build), else on the
# simulated GPU. GAIA_STATS=1 prints what moved.
DEMO_ENV = GAIA_STATS=1 LD_PRELOAD=$(CURDIR)/$(BUILD)/libgaia.so
demo: all
	@if nvidia-smi -L >/dev/null 2>&1 && cmake --build $(BUILD) --target gaia_demo_cuda >/dev/null 2>&1; then \
	  echo "demo: on the GPU"; $(DEMO_ENV) $(BUILD)/demo/gaia_demo_cuda; \
	else \
	  echo "demo: no GPU here: on the simulated GPU ($(BUILD)/simgpu)"; \
	  LD_LIBRARY_PATH=$(CURDIR)/$(BUILD)/simgpu $(DEMO_ENV) $(BUILD)/demo/gaia_demo; \
	fi

# The hardware checks (tools/hwcheck): the nvcc build on the GPU when
# nvidia-smi finds one, else the g++ build on the simulated GPU, whose
# answers are marked simulated (and the rest needs a GPU).
.PHONY: hwcheck hwtest
hwcheck: all
	@if nvidia-smi -L >/dev/null 2>&1 && cmake --build $(BUILD) --target gaia_hwcheck_cuda >/dev/null 2>&1; then \
	  $(BUILD)/tools/gaia-hwcheck-cuda --markdown $(BUILD)/hwcheck.md; \
	else \
	  echo "hwcheck: no GPU here, or no nvcc build: on the simulated GPU ($(BUILD)/simgpu)"; \
	  LD_LIBRARY_PATH=$(CURDIR)/$(BUILD)/simgpu $(BUILD)/tools/gaia-hwcheck --markdown $(BUILD)/hwcheck.md; \
	fi

# The demo, tests/programs and tests/gpu/protocol under the shim with each
# backing, and the workloads in every mode (tools/hwtest.sh): the nvcc
# builds on the GPU when nvidia-smi finds one, else the simulated GPU.
hwtest: all
	@if nvidia-smi -L >/dev/null 2>&1; then \
	  cmake --build $(BUILD) --target hwtest_cuda -j $(JOBS) && bash tools/hwtest.sh --gpu --build $(BUILD); \
	else \
	  echo "hwtest: no GPU here: on the simulated GPU ($(BUILD)/simgpu)"; \
	  bash tools/hwtest.sh --simulated --build $(BUILD); \
	fi

test: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600

# The whole suite under ASan+UBSan, and under TSan, each in its own build.
test-asan: deps
	@test -f build-asan/CMakeCache.txt || cmake -S . -B build-asan -DGAIA_SANITIZE=address $(CMAKE_ARGS)
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS) --timeout 600

test-tsan: deps
	@test -f build-tsan/CMakeCache.txt || cmake -S . -B build-tsan -DGAIA_SANITIZE=thread $(CMAKE_ARGS)
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && ctest --output-on-failure -j $(JOBS) --timeout 600

# The stress and kill -9 tests of `make test`, far longer, two at a time
# (the two stress tests run side by side for SOAK_SECONDS). Their own
# watchdog and deadline bound them; CTest's timeout is a backstop.
SOAK_SECONDS ?= 600
SOAK_KILL9_TRIALS ?= 5000
soak: all
	@cd $(BUILD) && { STRESS_SECONDS=$(SOAK_SECONDS) KILL9_TRIALS=$(SOAK_KILL9_TRIALS) \
	  CRASH_TRIALS=$(SOAK_KILL9_TRIALS) ctest --output-on-failure -V -j 2 --timeout $$(( $(SOAK_SECONDS) * 2 + 900 )) \
	  -R '^(stress/lanes|stress/gpu_streams|kill9/trials|crash/survivor)$$' >soak.log 2>&1; rc=$$?; \
	  grep -E '^[0-9]+: (stress|kill9|gpu_streams|survivor):|tests passed|Failed' soak.log; \
	  echo "soak: full output in $(BUILD)/soak.log"; exit $$rc; }

bench: bench-engine bench-cpu bench-gpu bench-peer bench-stream bench-gunrock bench-mosaic

bench-engine: all
	$(BUILD)/bench/bench_merge
	$(BUILD)/bench/bench_lrc

# fio is only for the unmanaged-I/O row: without it bench_cpu skips that row.
bench-cpu: all
	$(call install-debs,fio,optional)
	$(BUILD)/bench/bench_cpu --lib $(BUILD)/libgaia.so

# BENCH_GPU_SIZE_MB: the mapping of the launch+sync overhead row.
BENCH_GPU_SIZE_MB ?= 1024
bench-gpu: all
	LD_LIBRARY_PATH=$(CURDIR)/$(BUILD)/simgpu $(BUILD)/bench/bench_gpu --lib $(CURDIR)/$(BUILD)/libgaia.so --size-mb $(BENCH_GPU_SIZE_MB)

# Peer caching (README "Peer caching"): 4 KiB preads of a file dropped from
# the page cache, with and without a device holding it; a sweep of
# GAIA_READAHEAD_KB. Table, CSV and plot in $(BUILD)/bench-peer.
BENCH_PEER_SIZE_MB ?= 64
bench-peer: all
	$(call install-debs,gnuplot-nox,optional)
	mkdir -p $(BUILD)/bench-peer
	LD_LIBRARY_PATH=$(CURDIR)/$(BUILD)/simgpu $(BUILD)/bench/bench_peer --lib $(CURDIR)/$(BUILD)/libgaia.so \
	  --size-mb $(BENCH_PEER_SIZE_MB) --out $(CURDIR)/$(BUILD)/bench-peer
	@if command -v gnuplot >/dev/null; then gnuplot -e "set datafile separator ','; set terminal pngcairo size 800,480 noenhanced; \
	  set output '$(BUILD)/bench-peer/peer_readahead.png'; set logscale x 2; set xlabel 'GAIA_READAHEAD_KB'; \
	  set ylabel 'speedup over the kernel (sequential 4 KiB preads)'; set grid; \
	  plot '$(BUILD)/bench-peer/peer.csv' skip 1 using (strcol(3) eq 'default' ? 1/0 : \$$3):6 with linespoints title 'gaia / kernel'" \
	  && echo "plot: $(BUILD)/bench-peer/peer_readahead.png"; else echo "plot: gnuplot is not installed; CSV only"; fi

# Streaming read (the GAIA paper's Fig. 6a): a kernel reads a whole file
# 0.5x and 4x the simulated device's memory, as copy, managed and gaia; a
# sweep of GAIA_GPU_READAHEAD_KB. Table, CSV and plot in $(BUILD)/bench-stream.
BENCH_STREAM_DEVICE_MB ?= 64
bench-stream: all
	$(call install-debs,gnuplot-nox,optional)
	mkdir -p $(BUILD)/bench-stream
	LD_LIBRARY_PATH=$(CURDIR)/$(BUILD)/simgpu $(BUILD)/bench/bench_stream --lib $(CURDIR)/$(BUILD)/libgaia.so \
	  --device-mb $(BENCH_STREAM_DEVICE_MB) --out $(CURDIR)/$(BUILD)/bench-stream
	@if command -v gnuplot >/dev/null; then gnuplot -e "set datafile separator ','; set terminal pngcairo size 800,480 noenhanced; \
	  set output '$(BUILD)/bench-stream/stream_gpu_readahead.png'; set logscale x 2; set xlabel 'GAIA_GPU_READAHEAD_KB'; \
	  set ylabel 'GB/s (file 0.5x device memory, a replica)'; set grid; \
	  plot '$(BUILD)/bench-stream/stream.csv' skip 1 using (strcol(2) eq 'gaia-R' ? \$$4 : 1/0):6 with linespoints title 'gaia (replica)'" \
	  && echo "plot: $(BUILD)/bench-stream/stream_gpu_readahead.png"; else echo "plot: gnuplot is not installed; CSV only"; fi

# The dynamic-graph SSSP sweep; GUNROCK_BENCH_ARGS="--scale=18" for bigger
# runs (workloads/gunrock/README.md). gnuplot draws the plot when present.
GUNROCK_BENCH_ARGS ?=
bench-gunrock: all
	$(call install-debs,gnuplot-nox,optional)
	bash workloads/gunrock/bench_gunrock.sh --build=$(BUILD) $(GUNROCK_BENCH_ARGS)

# The collage and stitch workloads in every mode: tables, CSV, PNG plots and
# the collage in $(BUILD)/bench-mosaic; MOSAIC_SCALE=N for bigger runs
# (workloads/mosaic/README.md). gnuplot draws the plots when present.
MOSAIC_SCALE ?= 1
bench-mosaic: all
	$(call install-debs,gnuplot-nox,optional)
	bash workloads/mosaic/bench_mosaic.sh --build $(BUILD) --scale $(MOSAIC_SCALE)

# What goes where: cmake/GaiaInstall.cmake (lib/, bin/, include/,
# lib/pkgconfig/, share/man/ under PREFIX). CMake lists what it installed
# in $(BUILD)/install_manifest.txt (without DESTDIR); uninstall removes
# exactly those files, under the same DESTDIR.
PREFIX  ?= /usr/local
DESTDIR ?=
install: all
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

uninstall:
	DESTDIR="$(DESTDIR)" cmake -DMANIFEST="$(abspath $(BUILD))/install_manifest.txt" -P $(CURDIR)/cmake/uninstall.cmake

clean:
	rm -rf $(BUILD)
