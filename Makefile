# hearth — top-level entry points. Everything real lives in CMake; this file
# only names the jobs a user runs.  See README.md.

BUILD      ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
CMAKE_GEN  := -G Ninja
JOBS       ?= $(shell nproc)
DEMO_DIR   ?= .cache/demo

.PHONY: all deps configure build test test-unit test-asan test-arm demo bench bench-cluster fuzz fuzz-build fuzz-counted format tidy clean

all: build

deps:
	@scripts/install-deps

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release

configure: $(BUILD)/build.ninja

build: deps configure
	cmake --build $(BUILD) -j $(JOBS)

# Every test: the Release suite, the NEON kernels under qemu, then the sanitizer pass over
# the parsers, the wire protocol and the server.
# On x86_64 the aarch64 cross compiler and qemu come in the same apt run as the rest.
ifeq ($(shell uname -m),x86_64)
test: export HEARTH_EXTRA_DEPS := 1
endif
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) --no-print-directory test-arm
	$(MAKE) --no-print-directory test-asan

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# ASan + UBSan over the tests of HEARTH_SANITIZE_MODULES (GGUF reader, wire protocol, HTTP
# server): the sanitizer build contains only those test binaries.
test-asan: build
	cmake -S . -B $(BUILD_ASAN) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEARTH_SANITIZE=ON \
	  -DHEARTH_PREBUILT_DIR=$(abspath $(BUILD))
	cmake --build $(BUILD_ASAN) -j $(JOBS) --target hearth_sanitize_tests
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS)

# The NEON and dotprod kernels, cross-compiled for aarch64 and run under qemu-aarch64 (user
# mode) against the scalar reference. On an aarch64 host the normal suite covers them.
test-arm:
ifeq ($(shell uname -m),x86_64)
	@HEARTH_EXTRA_DEPS=1 scripts/install-deps
	OUT=$(BUILD)/neon-qemu sh tests/quant/run_neon_qemu.sh
endif

demo: build
	@$(BUILD)/bin/hearth demo --cache $(DEMO_DIR)

bench: build
	cmake --build $(BUILD) -j $(JOBS) --target hearth_benches
	$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$${FUZZ_SECONDS:-60}

# The emulated home cluster (bench/cluster/, docs/cluster-bench.md): four devices in network
# namespaces and cgroups, every system on Llama-shaped synthetic models, then
# bench/results/REPORT*.md and PNG plots. Root only. PROFILE=small (about 3 min) or full (17).
PROFILE ?= small
bench-cluster: build
	@HEARTH_BENCH_DEPS=1 scripts/install-deps
	bench/cluster/bench.sh --profile $(PROFILE) --bin $(BUILD)/bin/hearth

# Bounded libFuzzer runs, FUZZ_SECONDS each: the GGUF reader and the wire decoder from their
# committed seeds, LAN announcements, the worker's session logic (a worker in-process over
# loop://, hostile peers) and the head's (a head in-process against a hostile worker); then
# what a client or a model file reaches: HTTP framing, OpenAI bodies, chat templates, the
# tokenizer and stop strings, model metadata, GBNF grammars (committed corpora in
# tests/fixtures/fuzz/).
FUZZ_SECONDS ?= 120
FUZZ_TARGETS = gguf_fuzz wire_fuzz discovery_fuzz session_fuzz head_fuzz http_fuzz openai_fuzz \
  jinja_fuzz tokenizer_fuzz model_fuzz grammar_fuzz
fuzz-build: deps
	CC=clang CXX=clang++ cmake -S . -B $(BUILD_FUZZ) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEARTH_FUZZ=ON
	cmake --build $(BUILD_FUZZ) -j $(JOBS) --target $(FUZZ_TARGETS)

fuzz: fuzz-build
	mkdir -p $(BUILD_FUZZ)/corpus $(BUILD_FUZZ)/corpus-wire $(BUILD_FUZZ)/corpus-session $(BUILD_FUZZ)/corpus-discovery \
	  $(BUILD_FUZZ)/corpus-head $(BUILD_FUZZ)/corpus-model
	$(BUILD_FUZZ)/bin/gguf_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
	  $(BUILD_FUZZ)/corpus tests/fixtures/gguf_seeds
	$(BUILD_FUZZ)/bin/wire_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
	  $(BUILD_FUZZ)/corpus-wire tests/fixtures/wire
	$(BUILD_FUZZ)/bin/discovery_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=600 \
	  $(BUILD_FUZZ)/corpus-discovery
	$(BUILD_FUZZ)/bin/session_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=2048 \
	  $(BUILD_FUZZ)/corpus-session
	$(BUILD_FUZZ)/bin/head_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=1024 -len_control=0 \
	  $(BUILD_FUZZ)/corpus-head
	for t in http openai jinja tokenizer grammar; do mkdir -p $(BUILD_FUZZ)/corpus-$$t && \
	  $(BUILD_FUZZ)/bin/$${t}_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=8192 \
	    $(BUILD_FUZZ)/corpus-$$t tests/fixtures/fuzz/$$t || exit 1; done
	$(BUILD_FUZZ)/bin/model_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
	  $(BUILD_FUZZ)/corpus-model tests/fixtures/fuzz/model tests/fixtures/gguf_seeds

# Counted fuzz runs (bench/fuzz/counted.sh): 10^7 executions of each parser target (GGUF,
# wire, HTTP, OpenAI bodies, tokenizer, model metadata) and 10^6 of the template evaluator;
# prints executions, rate, coverage and crashes per target.
fuzz-counted: fuzz-build
	bench/fuzz/counted.sh $(BUILD_FUZZ)/bin

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h')

tidy: configure
	clang-tidy -p $(BUILD) $$(git ls-files 'src/*.cpp' 'apps/*.cpp')

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ)
