# strata — build, test, bench.
#   make            build/strata, build/libstrata.a, the tests and build/examples/*
#   make test       build and run every test; last line "N passed, N failed[, N skipped]"
#   make test SAN=1 the same under AddressSanitizer + UndefinedBehaviorSanitizer (build-san/)
#   make test TSAN=1 the same under ThreadSanitizer (build-tsan/)
#   make CUDA=1     also the CUDA backend (src/backend/cuda, nvcc) in build-cuda/; CUDA_ARCHS="80 90" adds GPUs
#   make CC=clang BUILD=build-clang   clang 14 build in its own folder
#   make fuzz       libFuzzer harnesses of tests/fuzz/ (clang, ASan+UBSan) in build-fuzz/fuzz/
#   make bench      bench/bench_qwen3moe.sh: strata and llama.cpp on a qwen3-30b-a3b-shaped model

CC      ?= gcc
SAN     ?= 0
TSAN    ?= 0
CUDA    ?= 0
FUZZ    ?= 0

ifeq ($(FUZZ),1)
# libFuzzer: the code is instrumented for coverage, the harness links the fuzzer's main
BUILD   ?= build-fuzz
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
LDSAN   := -fsanitize=fuzzer,address,undefined
else ifeq ($(SAN),1)
BUILD   ?= build-san
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
LDSAN   := -fsanitize=address,undefined
else ifeq ($(TSAN),1)
BUILD   ?= build-tsan
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=thread
LDSAN   := -fsanitize=thread
else ifeq ($(CUDA),1)
BUILD   ?= build-cuda
OPT     := -O2 -g
else
BUILD   ?= build
OPT     := -O2 -g
LDSAN   :=
endif

CFLAGS  := -std=c11 -D_GNU_SOURCE $(OPT) -Wall -Wextra -Werror -pthread -Iinclude -Isrc $(EXTRA_CFLAGS)
LDLIBS  := -lm -pthread -luring -lcjson -lmicrohttpd $(EXTRA_LDLIBS)

# SIMD variants live in files named *_avx2.c / *_avx512.c / *_amx.c and are compiled with their ISA flags;
# the dispatcher picks one at start-up from CPU detection, so the rest stays baseline x86-64.
AVX2_FLAGS   := -mavx2 -mfma -mf16c -mbmi2
AVX512_FLAGS := $(AVX2_FLAGS) -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16
AMX_FLAGS    := $(AVX512_FLAGS) -mavx512vbmi -mamx-tile -mamx-int8 -mamx-bf16

LIB_SRC  := $(sort $(shell find src -name '*.c' ! -name main.c ! -path 'src/backend/cuda/*' ! -path 'src/cli/*' ! -path 'src/server/*'))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_SRC  := src/main.c $(sort $(wildcard src/cli/*.c))
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
# The HTTP server is a client of the library like the CLI (and the only user of libmicrohttpd).
SRV_SRC  := $(sort $(wildcard src/server/*.c))
SRV_OBJ  := $(SRV_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(sort $(wildcard tests/test_*.c))
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

ifeq ($(CUDA),1)
CUDA_HOME ?= /usr/local/cuda
NVCC     ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCHS ?= 90
# machine code for each architecture, and PTX of the newest for GPUs after it
NVCC_ARCH := $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
             -gencode arch=compute_$(lastword $(CUDA_ARCHS)),code=compute_$(lastword $(CUDA_ARCHS))
NVCCFLAGS := -O3 -std=c++17 $(NVCC_ARCH) -Iinclude -Isrc -Xcompiler -Wall,-Wextra -Werror all-warnings $(EXTRA_NVCCFLAGS)
CU_SRC   := $(sort $(wildcard src/backend/cuda/*.cu))
# CUDA tests written in CUDA C++ (host code that needs no GPU)
TEST_BIN += $(patsubst tests/%.cu,$(BUILD)/tests/%,$(sort $(wildcard tests/test_*.cu)))
CU_OBJ   := $(CU_SRC:%.cu=$(BUILD)/%.o) $(patsubst %.c,$(BUILD)/%.o,$(sort $(wildcard src/backend/cuda/*.c)))
LIB_OBJ  += $(CU_OBJ)
CFLAGS   += -DSTRATA_CUDA=1
# the runtime linked statically: the binary runs wherever the driver is new enough. Where it is
# found: CUDA_LIBDIR if given, else the folders nvcc itself links from (its --dryrun LIBRARIES,
# which follow the toolkit's layout wherever nvcc was installed), else CUDA_HOME's lib64 and lib.
CUDA_LIBDIR ?= $(patsubst -L%,%,$(filter-out %/stubs,$(subst ",,$(shell $(NVCC) --dryrun -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^\#\$$ LIBRARIES=//p'))))
LDLIBS   += $(addprefix -L,$(CUDA_LIBDIR)) -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/lib -lcudart_static -ldl -lrt -lstdc++
endif

.PHONY: all test bench clean objs cudart-check
all: $(BUILD)/strata $(BUILD)/libstrata.a tests-build examples-build

# every object, nothing linked: CI compiles the CUDA code this way where the toolkit has no
# static runtime to link against
objs: $(LIB_OBJ) $(CLI_OBJ) $(SRV_OBJ)

# succeeds when the CUDA runtime can be linked with this LDLIBS (make CUDA=1 cudart-check)
cudart-check:
	@echo 'int main(void) { return 0; }' | $(CC) -x c - -o /dev/null $(LDLIBS)

$(BUILD)/libstrata.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/strata: $(CLI_OBJ) $(SRV_OBJ) $(BUILD)/libstrata.a
	$(CC) $(LDSAN) -o $@ $^ $(LDLIBS)

# Examples use the public API only: include/ is their only include path.
EXAMPLE_SRC := $(sort $(wildcard examples/*.c))
EXAMPLE_BIN := $(EXAMPLE_SRC:examples/%.c=$(BUILD)/examples/%)
.PHONY: examples-build
examples-build: $(EXAMPLE_BIN)

$(BUILD)/examples/%: examples/%.c include/strata.h $(BUILD)/libstrata.a
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -Isrc,$(CFLAGS)) -o $@ $< $(BUILD)/libstrata.a $(LDSAN) $(LDLIBS)

# page.c embeds page.html with .incbin
$(BUILD)/src/server/page.o: src/server/page.html

$(BUILD)/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AVX2_FLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AVX512_FLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/%_amx.o: %_amx.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AMX_FLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/tests/%: tests/%.cu $(BUILD)/libstrata.a
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Itests -o $@ $< $(BUILD)/libstrata.a -Xlinker --start-group $(filter-out -lstdc++ -pthread,$(LDLIBS)) -Xlinker --end-group

$(BUILD)/tests/%: tests/%.c $(BUILD)/libstrata.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(BUILD)/libstrata.a $(LDSAN) $(LDLIBS)

# Tests of the server's parts link its objects too.
$(BUILD)/tests/test_server%: tests/test_server%.c $(SRV_OBJ) $(BUILD)/libstrata.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(SRV_OBJ) $(BUILD)/libstrata.a $(LDSAN) $(LDLIBS)

# Fuzz harnesses (tests/fuzz/fuzz_*.c) link the library, the server's objects and the CLI's
# argument parsers; `make fuzz` builds them with clang in build-fuzz/ (tests/fuzz/run.sh runs them).
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_CLI_OBJ := $(BUILD)/src/cli/args.o $(BUILD)/src/cli/store_opts.o
.PHONY: fuzz fuzz-build
fuzz:
	$(MAKE) FUZZ=1 CC=clang fuzz-build
fuzz-build: $(FUZZ_BIN)

$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz_util.h $(FUZZ_CLI_OBJ) $(SRV_OBJ) $(BUILD)/libstrata.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(FUZZ_CLI_OBJ) $(SRV_OBJ) $(BUILD)/libstrata.a $(LDSAN) $(LDLIBS)

.PHONY: tests-build
tests-build: $(TEST_BIN)

test: all
	@STRATA_BUILD=$(BUILD) bash tests/run.sh

bench: all $(BUILD)/membw
	bash bench/bench_qwen3moe.sh

clean:
	rm -rf build build-san build-tsan build-cuda build-fuzz

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# The engine side of serve's concurrency, per phase (bench/batch_decode.c).
$(BUILD)/batch_decode: bench/batch_decode.c $(BUILD)/libstrata.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libstrata.a $(LDLIBS)

$(BUILD)/membw: bench/membw.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -march=x86-64-v2 -pthread -o $@ $<
