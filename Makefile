# Two commands matter: `make demo` and `make test`. `make` builds release binaries into build/bin/.
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all build setup test test-asan demo bench clean
all: build

setup:
	@scripts/setup.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: setup build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600

test-asan: setup
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DTIDEGATE_SANITIZE=ON -DTIDEGATE_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS) --timeout 900 -LE no-asan

demo: setup build
	scripts/demo.sh

bench: setup build
	bench/run_all.sh

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
