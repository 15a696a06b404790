# Thin wrapper over CMake: the targets a person types.
#   make            build everything into build/
#   make demo       build and run the main demo
#   make test       build and run every test (CTest)
#   make bench      run every benchmark
#   make bench-engine   the engine benchmarks (merge, versions, release/acquire)
# Missing Debian packages are installed when run as root; otherwise the
# exact apt-get line is printed.

BUILD      ?= build
CMAKE_ARGS ?=
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
DEB_PACKAGES := cmake make gcc g++ pkg-config libcmocka-dev libunwind-dev libxxhash-dev

.PHONY: all deps configure demo test bench bench-engine clean

all: configure
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; \
	  else \
	    echo "missing Debian packages; run:"; \
	    echo "  sudo apt-get install -y$$missing"; \
	    exit 1; \
	  fi; \
	fi

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CMAKE_ARGS)

demo: bench-engine

test: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: bench-engine

bench-engine: all
	$(BUILD)/bench/bench_merge
	$(BUILD)/bench/bench_lrc

clean:
	rm -rf $(BUILD)
