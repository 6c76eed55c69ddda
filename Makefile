# Two commands matter: `make demo` and `make test`. `make` builds release binaries into build/bin/.
BUILD      ?= build
BUILD_ASAN ?= build-asan
BUILD_TSAN ?= build-tsan
JOBS       ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all build setup setup-engines test build-asan test-asan build-tsan test-tsan test-engines demo bench clean
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

# The sanitizer builds leave out the benchmarks (the release build compiles them) and CUDA, and
# keep only line tables (-g1: enough for the reports' stack traces, and much less to compile).
build-asan: setup
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DTIDEGATE_SANITIZE=ON -DTIDEGATE_CUDA=OFF -DTIDEGATE_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD_ASAN) -j $(JOBS)

# TIDEGATE_TEST_SLOWDOWN=2: an unoptimised ASan build runs the gateway several times slower, so
# the e2e waits and takeover bounds get twice their time (as TSan's get three times).
test-asan: build-asan
	cd $(BUILD_ASAN) && TIDEGATE_TEST_SLOWDOWN=2 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS) --timeout 900 -LE no-asan

# ThreadSanitizer: -O1 (at -O0 the e2e tests' deadlines are too tight under TSan's slowdown).
# OMP_NUM_THREADS=1: libgomp is not instrumented, so FAISS's OpenMP workers would be reported
# as races; our own threads are what this build is for. halt_on_error: a report fails the test
# (the e2e harnesses also look for "ThreadSanitizer" in the gateway's stderr). The e2e waits
# get 3x their time; the HNSW-vs-FAISS differential test (single-threaded numerics, 16 s in
# release, 6 minutes under TSan) is left to the other two builds.
#
# What this build is for is our own threads: the gateway's server, cache workers, encoder pool,
# embed batcher, scaler and cost accounting, so it builds the binaries and tests that run them
# (TSAN_TARGETS) and leaves out what is single-threaded or not ours to race (the replay, the routing library,
# kernels, tidegate-sim's own tests, the scaler's pure policy tests, the cache evaluator, the
# promtool/Chromium/Grafana checks) and the Python scaler scenarios (app.scaler.*: timers
# waited out three times over; the scaler's threads are under TSan in scaler.integration.* and
# scaler.scaler), and likewise multi_gateway.leader_* (lease timings; the electors' threads are
# under TSan in scaler.lease_api). The release and ASan builds run all of them.
TSAN_TARGETS = tidegate tidegate-sim tidegate_app_tests tidegate_gateway_tests tidegate_gateway_hooks_test \
  tidegate_cache_tests tidegate_encoder_tests tidegate_cache_backend_tests tidegate_cache_integration_tests \
  tidegate_common_tests tidegate_cost_tests tidegate_scaler_integration_test tidegate_scaler_scaler_test \
  tidegate_scaler_process_test tidegate_scaler_engines_test tidegate_scaler_kubernetes_test tidegate_scaler_lifecycle_routing_test \
  tidegate_redis_tests tidegate_ratelimit_tests tidegate_scaler_leader_election_test tidegate_scaler_lease_api_test tidegate_scaler_scaler_election_test
TSAN_SKIP = ^(sim|kernels|replay|routing|app\.scaler|bench)\.|^multi_gateway\.leader_|^cache\.eval_(smoke|candidates_dump)$$|^cost\.(dashboard_browser|promtool_.*|grafana_dashboard)$$|^scaler\.(policy|work_model|standby|measured_burst|burst_by_burst|smooth_demand|backlog|quiet_gap|lifecycle|signals|config|manifests)$$
build-tsan: setup
	cmake -S . -B $(BUILD_TSAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" -DTIDEGATE_TSAN=ON -DTIDEGATE_CUDA=OFF -DTIDEGATE_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD_TSAN) -j $(JOBS) --target $(TSAN_TARGETS)

test-tsan: build-tsan
	cd $(BUILD_TSAN) && OMP_NUM_THREADS=1 TIDEGATE_TEST_SLOWDOWN=3 GTEST_FILTER='-*PrefetchingSearchAgreesWithFaissSearch*' TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp" ctest --output-on-failure -j $(JOBS) --timeout 900 -LE "no-asan|no-tsan" -E '$(TSAN_SKIP)'

# ENGINE=llama.cpp: the scaler starts real llama-server replicas with SmolLM2-135M.
demo: setup build
	@if [ "$(ENGINE)" = "llama.cpp" ]; then scripts/setup_engines.sh && ENGINE=llama.cpp scripts/demo.sh; else scripts/demo.sh; fi

bench: setup build
	bench/run_all.sh

# libFuzzer targets for the parsers (fuzz/README.md): a clang build of its own in build-fuzz/,
# then every target for FUZZ_SECONDS on a copy of its seed corpus; fails on any crash, leak,
# out-of-memory or timeout.
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz: setup
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_BUILD=build-fuzz FUZZ_JOBS=$(JOBS) fuzz/run.sh

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_TSAN)
