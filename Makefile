# Two commands matter: `make demo` and `make test`. `make` builds release binaries into build/bin/.
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all build setup setup-engines test test-asan test-engines demo bench clean
all: build

setup:
	@scripts/setup.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

setup-engines: setup
	@scripts/setup_engines.sh

test: setup build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600 -LE engines

# The real-engine suite: llama.cpp's llama-server with SmolLM2-135M (built once into
# third_party/engines/ by scripts/setup_engines.sh, about 10 minutes on 2 cores).
test-engines: setup-engines build
	cd $(BUILD) && ctest --output-on-failure --timeout 600 -L engines

test-asan: setup
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DTIDEGATE_SANITIZE=ON -DTIDEGATE_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS) --timeout 900 -LE no-asan

# ENGINE=llama.cpp: the scaler starts real llama-server replicas with SmolLM2-135M.
demo: setup build
	@if [ "$(ENGINE)" = "llama.cpp" ]; then scripts/setup_engines.sh && ENGINE=llama.cpp scripts/demo.sh; else scripts/demo.sh; fi

bench: setup build
	bench/run_all.sh

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
