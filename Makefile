# gpuguard: plain make, out-of-tree build/. Targets: all check check-gpu bench soak
# demo install clean; `make check SAN=address|undefined|thread` builds and runs
# the whole suite with a sanitizer, in build/san-<name>/.

CC ?= cc
CFLAGS ?= -O2 -g
WERROR ?= -Werror
PREFIX ?= /usr/local
SAN ?=

BUILD := build
ifneq ($(SAN),)
BUILD := build/san-$(SAN)
SANFLAGS := -fsanitize=$(SAN) -fno-omit-frame-pointer
ifeq ($(SAN),undefined)
SANFLAGS += -fno-sanitize-recover=undefined
endif
SAN_RUNTIME := $(shell $(CC) -print-file-name=lib$(subst address,asan,$(subst thread,tsan,$(subst undefined,ubsan,$(SAN)))).so)
endif

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes $(WERROR)
BASE_CFLAGS := -std=gnu11 $(WARN) -Iinclude -pthread $(SANFLAGS) $(CFLAGS)
# glibc_compat.h: symbol versions old enough for glibc 2.17 (old images), in
# the shipped build. Sanitizer builds are for tests on this machine and their
# runtimes need new glibc anyway; GNU ld also leaves a broken PLT entry when
# .symver meets TSan's interceptors.
LIB_CFLAGS := $(BASE_CFLAGS) -fPIC -fvisibility=hidden $(if $(SAN),,-include interpose/glibc_compat.h)
LDLIBS := -ldl -lpthread
# Before glibc 2.34 dlopen and pthread_create live in libdl.so.2 and
# libpthread.so.0 (glibc_compat.h binds their old versions): the library
# names both, which on newer glibc are empty stubs that are always there.
LIB_LDLIBS := -Wl,--no-as-needed -l:libdl.so.2 -l:libpthread.so.0 -Wl,--as-needed

LIB_SRCS := $(wildcard interpose/*.c)
LIB_OBJS := $(patsubst interpose/%.c,$(BUILD)/obj/%.o,$(LIB_SRCS))
LIB := $(BUILD)/lib/libgpuguard.so
# The names the library must export, read off interpose/hooks.h's rows by the
# preprocessor (tests/exports.c); tests/scripts/exports.sh compares nm -D with
# it. A test's input, so not part of lib (the image's build has no tests/).
EXPORTS := $(BUILD)/lib/exports.txt
# The core modules unit tests compile in directly (no hooks, no preload):
# every object of tests/layers.txt's layers below the hooks' bodies (shape),
# so a new module is its .c, its .h and its place in tests/layers.txt.
CORE_SRCS := $(patsubst %,interpose/%.c,$(shell awk '$$1 == "shape" { exit } \
	!/^\#/ { for (i = 2; i <= NF; i++) if ($$i !~ /\.h$$/) print $$i }' tests/layers.txt 2>/dev/null))
HEADERS := $(wildcard include/*.h include/gpuguard/*.h interpose/*.h tests/*.h)

SIM_CUDA := $(BUILD)/sim/libcuda.so.1
SIM_HIP := $(BUILD)/sim/libamdhip64.so.6
SIM_NVML := $(BUILD)/sim/libnvidia-ml.so.1
SIM := $(SIM_CUDA) $(SIM_HIP) $(SIM_NVML)
# reads NVML in a loop, without gpuguard (tests/sim/README.md)
NVML_WATCH := $(BUILD)/sim/nvml_watch
comma := ,
SIM_SRCS := tests/sim/simcore.c tests/sim/simcard.c

UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRCS))
PRELOAD_SRCS := $(wildcard tests/preload/t_*.c)
PRELOAD_BINS := $(patsubst tests/preload/%.c,$(BUILD)/tests/preload/%,$(PRELOAD_SRCS))
PRELOAD_LIBS := $(BUILD)/tests/preload/libnextuser.so $(BUILD)/tests/preload/libnextbase.so \
	$(BUILD)/tests/preload/libdeepplugin.so $(BUILD)/tests/preload/libctoruser.so
SIM_TEST := $(BUILD)/tests/sim_test
# Helpers of tests/scripts/top_metrics.sh: region images, a raw HTTP client.
# flood: the slow-client flood of tests/scripts/metrics_flood.sh; signame and
# sigprobe: the command's and the library's reading of GPUGUARD_DUMP_SIGNAL
# (tests/scripts/dump_target.sh). podclient: a pod member driven from stdin
# (tests/scripts/region_fault.sh). podsoak and its shim: the kill soak
# (tests/scripts/soak.sh, `make soak`). schemacheck and the generated dump:
# tests/scripts/schema.sh.
TEST_TOOLS := $(BUILD)/tests/tools/mkregion $(BUILD)/tests/tools/httpc $(BUILD)/tests/tools/flood \
	$(BUILD)/tests/tools/signame $(BUILD)/tests/tools/sigprobe $(BUILD)/tests/tools/podclient \
	$(BUILD)/tests/tools/podsoak $(BUILD)/tests/tools/libpodsoak_shim.so $(BUILD)/tests/tools/schemacheck \
	$(BUILD)/tests/bench/gen_dump
EXAMPLES := $(BUILD)/examples/kvcache
# Programs that behave as vLLM, JAX, TensorRT-LLM, PyTorch (through a
# stand-in libc10_cuda.so) and a plain C program do towards the driver
# (tests/servers/, tests/scripts/servers.sh).
SERVERS := $(patsubst tests/servers/%.c,$(BUILD)/tests/servers/%,$(filter-out tests/servers/lib%.c,$(wildcard tests/servers/*.c))) \
	$(BUILD)/tests/servers/libc10_cuda.so
BENCH := $(BUILD)/tests/bench/bench
# The gpuguard command (tools/): report, run, dump, top (top.c), metrics (metrics.c,
# served by http.c, node-wide by discover.c). Needs uthash-dev.
TOOL := $(BUILD)/bin/gpuguard
# The rules it shares with the library are headers (include/gpuguard/).
TOOL_SRCS := $(wildcard tools/*.c)
# The real-library programs (tests/reallib/): built by the CUDA toolkit's own
# nvcc, found as tests/abi/check.sh finds the headers (NVCC, CUDA_HOME, PATH,
# /usr/local/cuda). Host code only, never instrumented, so every build variant
# shares one cache in build/reallib/. Without a toolkit, tests/run.sh skips
# them by name.
NVCC ?= $(firstword $(wildcard $(CUDA_HOME)/bin/nvcc) $(shell command -v nvcc 2>/dev/null) \
	$(wildcard /usr/local/cuda/bin/nvcc))
REALLIB := build/reallib
REALLIB_NAMES := rl_cudart_shared rl_cudart_static rl_cudart_ptds rl_libs
ifneq ($(NVCC),)
CUDA_ROOT := $(patsubst %/bin/nvcc,%,$(realpath $(NVCC)))
# rl_fill_*: the pods of tests/scripts/shared_card.sh, not test programs themselves
REALLIB_BINS := $(addprefix $(REALLIB)/,$(REALLIB_NAMES) rl_fill_shared rl_fill_static)
# make check-gpu's card programs (tests/gpu/card.cu, pairs.cu; host code), built
# here so a lent card needs no compiler; nvml_watch beside them, as
# tests/gpu/lent.sh carries build/gpu. tests/scripts/gpu_selftest.sh runs them
# on the simulator.
GPU_BINS := build/gpu/card build/gpu/pairs
# only the plain build's (a sanitizer's or aarch64's would not run on the card)
ifeq ($(BUILD),build)
GPU_BINS += build/gpu/nvml_watch
endif
endif
REALLIB_DEPS := tests/reallib/rl.h tests/harness.h include/gpuguard.h
# -rdynamic: the exit dump's report names the program's own functions.
NVCC_FLAGS := -std=c++17 -Iinclude -Xcompiler -Wall,-Werror,-Wno-deprecated-declarations -Xlinker -rpath=$(CUDA_ROOT)/lib64 \
	-Xlinker -export-dynamic
FUZZ_CC ?= clang
FUZZ_TIME ?= 60

.PHONY: all lib sim tests check check-all soak check-aarch64 check-gpu gpu-build bench demo install clean deps format format-check fuzz image-context image-stage
all: lib sim tests $(EXAMPLES) $(TOOL)
lib: $(LIB)
sim: $(SIM) $(NVML_WATCH)
tests: $(EXPORTS) $(UNIT_BINS) $(PRELOAD_BINS) $(PRELOAD_LIBS) $(SIM_TEST) $(BUILD)/tests/abi/conformance.stamp $(TEST_TOOLS) $(SERVERS) \
	$(REALLIB_BINS) $(GPU_BINS)

# Each object depends on the headers it includes, as the compiler lists
# them (-MMD: build/obj/NAME.d; -MP: a header that goes away breaks nothing).
$(BUILD)/obj/%.o: interpose/%.c
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -MMD -MP -c $< -o $@
-include $(LIB_OBJS:.o=.d)

$(LIB): $(LIB_OBJS) interpose/exports.map
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -shared -Wl,-soname,libgpuguard.so -Wl,--version-script=interpose/exports.map \
		-o $@ $(LIB_OBJS) $(LIB_LDLIBS)

$(EXPORTS): tests/exports.c interpose/hooks.h
	@mkdir -p $(@D)
	$(CC) -E -P -Iinterpose -x c tests/exports.c >$@.i
	tr -s ' \t' '\n\n' <$@.i | sed '/^$$/d' | LC_ALL=C sort -u >$@
	rm -f $@.i

# The simulated GPU (tests/sim/README.md).
SIM_CUDA_SRCS := tests/sim/sim_cuda.c tests/sim/sim_md2.c
$(SIM_CUDA): $(SIM_CUDA_SRCS) $(SIM_SRCS) tests/sim/simcore.h tests/sim/sim_md2.h tests/sim/sim_cuda_extra.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -fPIC -shared -Wl,-soname,libcuda.so.1 -o $@ $(SIM_CUDA_SRCS) $(SIM_SRCS)
	ln -sf libcuda.so.1 $(@D)/libcuda.so

$(SIM_HIP): tests/sim/sim_hip.c $(SIM_SRCS) tests/sim/simcore.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -DSIM_LIB_ID=1 -fPIC -shared -Wl,-soname,libamdhip64.so.6 -o $@ tests/sim/sim_hip.c $(SIM_SRCS)
	ln -sf libamdhip64.so.6 $(@D)/libamdhip64.so

$(SIM_NVML): tests/sim/sim_nvml.c $(SIM_SRCS) tests/sim/simcore.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -fPIC -shared -Wl,-soname,libnvidia-ml.so.1 -o $@ tests/sim/sim_nvml.c $(SIM_SRCS)
	ln -sf libnvidia-ml.so.1 $(@D)/libnvidia-ml.so

$(NVML_WATCH): tests/sim/nvml_watch.c $(SIM_NVML) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -o $@ $< -L$(BUILD)/sim -lnvidia-ml $(LDLIBS)

$(SIM_TEST): tests/sim/test_sim.c $(SIM) $(NVML_WATCH) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -o $@ $< -L$(BUILD)/sim -lcuda -lamdhip64 -lnvidia-ml $(LDLIBS)

# Unit tests compile the core straight in, so sanitizers see every line:
# each the files it tests and the layers below them (tests/layers.txt, held
# by tests/scripts/layering.sh), no more; a test not named here takes all
# (test_ceiling: initialisation maps the table its brackets record in;
# test_pool: without initialisation's stack capture its destroy race is
# timed differently, and pool.c's remove-then-reinsert window in
# gg_pool_destroy_end shows under ThreadSanitizer).
UNIT_CORE_test_table := table
# test_table_fieldwise: table.c's big-endian payload form, forced.
UNIT_CORE_test_table_fieldwise := table
$(BUILD)/tests/unit/test_table_fieldwise: BASE_CFLAGS += -DGG_TABLE_FIELDWISE
$(BUILD)/tests/unit/test_table_fieldwise: tests/unit/test_table.c
UNIT_CORE_test_history := base log options resolve stack pystack history ceiling
UNIT_CORE_test_options := base log options resolve stack pystack history ceiling
UNIT_CORE_test_dump := base compat log options resolve signal table vmm stack pystack history ceiling shared_file shared_guard shared_obit shared_sweep shared_pinned shared_attach shared footprint dump dump_json dump_records dump_host meminfo
UNIT_CORE_test_handles := $(UNIT_CORE_test_dump) pool account
UNIT_CORE_test_vmm := vmm
UNIT_CORE_test_stack := base log options resolve stack pystack
UNIT_CORE_test_pystack := base log options resolve pystack
# test_writer reads back what the writer wrote with the command's loader.
UNIT_CORE_test_writer := $(UNIT_CORE_test_dump)
UNIT_TOOLS_test_writer := load jsonl text fmt region analyze
$(BUILD)/tests/unit/test_writer: $(patsubst %,tools/%.c,$(UNIT_TOOLS_test_writer)) tools/tool.h
# test_stack unwinds a known chain, which lies in a library of its own (a
# capture skips the frames of the object it is in), built like the test with
# frame pointers so that the frame-pointer walk can follow it.
$(BUILD)/tests/unit/test_stack: BASE_CFLAGS += -fno-omit-frame-pointer
$(BUILD)/tests/unit/test_stack: LDLIBS += -L$(BUILD)/tests/unit -lstackchain -Wl,-rpath,'$$ORIGIN'
$(BUILD)/tests/unit/test_stack: $(BUILD)/tests/unit/libstackchain.so
$(BUILD)/tests/unit/libstackchain.so: tests/unit/stack_chain.c tests/unit/stack_chain.h
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -fPIC -shared -o $@ $<
unit_core = $(if $(UNIT_CORE_$(1)),$(patsubst %,interpose/%.c,$(UNIT_CORE_$(1))),$(CORE_SRCS))
$(BUILD)/tests/unit/%: tests/unit/%.c $(CORE_SRCS) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -iquote interpose -o $@ $< $(call unit_core,$*) $(patsubst %,tools/%.c,$(UNIT_TOOLS_$*)) $(LDLIBS)

LNEXT := -Wl,--no-as-needed -lnextuser -lnextbase -Wl,--as-needed
# Programs run under LD_PRELOAD. *_lcuda links the driver, *_lhip HIP, *_lnvml NVML,
# *_lnext the two RTLD_NEXT test libraries, *_lctor the library that calls the
# driver from its constructor, *_rdyn exports the program's own symbols
# (-rdynamic); anything else uses dlopen only.
$(BUILD)/tests/preload/t_%: tests/preload/t_%.c $(wildcard tests/preload/*.h) $(SIM) $(PRELOAD_LIBS) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -o $@ $< -L$(BUILD)/sim -L$(BUILD)/tests/preload \
		$(if $(findstring _lcuda,$*),-lcuda) $(if $(findstring _lhip,$*),-lamdhip64) \
		$(if $(findstring _lnvml,$*),-lnvidia-ml) \
		$(if $(findstring _lnext,$*),$(LNEXT)) $(if $(findstring _lctor,$*),-lctoruser) \
		$(if $(findstring _rdyn,$*),-rdynamic) $(LDLIBS)

$(BUILD)/tests/preload/lib%.so: tests/preload/lib%.c $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -fPIC -shared -o $@ $< $(LDLIBS)

# The plugin links the driver itself, as a framework's CUDA plugin does; so
# does the library whose constructor calls it.
$(BUILD)/tests/preload/libdeepplugin.so $(BUILD)/tests/preload/libctoruser.so: \
		$(BUILD)/tests/preload/lib%.so: tests/preload/lib%.c $(SIM) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -fPIC -shared -o $@ $< -L$(BUILD)/sim -lcuda $(LDLIBS)

# ABI conformance: compiles only where the vendor headers are (tests/abi/).
$(BUILD)/tests/abi/conformance.stamp: tests/abi/check.sh tests/abi/lib.sh tests/scripts/lib.sh $(wildcard tests/abi/*.c tests/abi/*.h) $(HEADERS)
	@mkdir -p $(@D)
	CC="$(CC)" OUT=$(@D) sh tests/abi/check.sh > $(@D)/result.txt 2>&1 || { cat $(@D)/result.txt; exit 1; }
	touch $@

$(REALLIB)/rl_cudart_shared: tests/reallib/rl_cudart.cu $(REALLIB_DEPS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) -cudart shared -o $@ $< -ldl
$(REALLIB)/rl_cudart_static: tests/reallib/rl_cudart.cu $(REALLIB_DEPS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) -cudart static -o $@ $< -ldl
$(REALLIB)/rl_cudart_ptds: tests/reallib/rl_cudart.cu $(REALLIB_DEPS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) --default-stream per-thread -o $@ $< -ldl
$(REALLIB)/rl_libs: tests/reallib/rl_libs.cu $(REALLIB_DEPS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) -cudart shared -o $@ $< -lcublas -lcublasLt -lnccl -ldl
# One pod of the shared-card test (tests/scripts/shared_card.sh), as each runtime links.
$(REALLIB)/rl_fill_shared: tests/reallib/rl_fill.cu $(REALLIB_DEPS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) -cudart shared -o $@ $< -lcublas -lcublasLt -lnccl -ldl
$(REALLIB)/rl_fill_static: tests/reallib/rl_fill.cu $(REALLIB_DEPS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) -cudart static -o $@ $< -lcublas -lcublasLt -lnccl -ldl

# The card programs: linked against the stub libcuda (the driver is the card's
# own, or build/sim's under LD_LIBRARY_PATH), cudart, cuBLAS and NCCL.
GPU_DEPS := include/gpuguard/nvml_abi.h
build/gpu/card: tests/gpu/card.cu $(GPU_DEPS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) -cudart shared -o $@ $< -L$(CUDA_ROOT)/lib64/stubs -lcuda -lcublas -lnccl -ldl
build/gpu/pairs: tests/gpu/pairs.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) -cudart shared -o $@ $<
build/gpu/nvml_watch: $(NVML_WATCH)
	@mkdir -p $(@D)
	cp -f $< $@
# Everything make check-gpu runs, built here (tests/gpu/lent.sh --prepare):
# the card programs above and run.sh's device-code programs (-gencode).
gpu-build: lib $(TOOL) $(REALLIB_BINS) $(GPU_BINS)
	GG_GPU_BUILD_ONLY=1 sh tests/gpu/run.sh

# -rdynamic: the demo's dump names its functions, as a real server's would.
$(BUILD)/examples/%: examples/%.c $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -rdynamic -o $@ $< $(LDLIBS)

# A fresh machine without uthash gets one line naming the package, not a
# compiler error (README's two commands install it themselves). Everything
# that includes tools/tool.h waits on this check (order-only, so it runs
# before the first compile even under make -j).
UTHASH_OK := $(BUILD)/obj/uthash.ok
$(UTHASH_OK):
	@mkdir -p $(@D)
	@echo '#include <uthash.h>' | $(CC) $(BASE_CFLAGS) -E -x c - >/dev/null 2>&1 || \
		{ echo "gpuguard: the gpuguard command and its tests need uthash.h: install the Debian package uthash-dev (or run make deps)" >&2; exit 1; }
	@touch $@
$(BUILD)/tests/unit/test_writer $(BUILD)/tests/tools/schemacheck: | $(UTHASH_OK)
$(TOOL): $(TOOL_SRCS) tools/tool.h tools/live.h $(HEADERS) | $(UTHASH_OK)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -o $@ $(TOOL_SRCS) -ldl

# Dumps against the one list of keys (tests/scripts/schema.sh), read with
# the command's own JSON reader.
$(BUILD)/tests/tools/schemacheck: tests/tools/schemacheck.c tools/jsonl.c tools/text.c tools/tool.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -Itools -o $@ tests/tools/schemacheck.c tools/jsonl.c tools/text.c

$(BUILD)/tests/bench/gen_dump: tests/bench/gen_dump.c $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -o $@ $<

$(BUILD)/tests/tools/sigprobe $(BUILD)/tests/tools/podclient: $(BUILD)/tests/tools/%: tests/tools/%.c $(SIM) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -o $@ $< -L$(BUILD)/sim -lcuda $(LDLIBS)

$(BUILD)/tests/tools/podsoak: tests/tools/podsoak.c tests/tools/podsoak.h $(SIM) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -o $@ $< -L$(BUILD)/sim -lcuda $(LDLIBS)

# Preloaded after libgpuguard: gpuguard's RTLD_NEXT finds it, and it the simulator.
$(BUILD)/tests/tools/libpodsoak_shim.so: tests/tools/podsoak_shim.c tests/tools/podsoak.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -fPIC -shared -o $@ $< $(LDLIBS)

# -rdynamic and a library of its own: the dumps name the servers' frames.
$(BUILD)/tests/servers/libc10_cuda.so: tests/servers/libc10_cuda.c $(SIM) $(HEADERS) $(wildcard tests/servers/*.h)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -fPIC -shared -o $@ $< -L$(BUILD)/sim -lcuda
$(BUILD)/tests/servers/torch_like: $(BUILD)/tests/servers/libc10_cuda.so
$(BUILD)/tests/servers/%: tests/servers/%.c $(SIM) $(HEADERS) $(wildcard tests/servers/*.h)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -rdynamic -o $@ $< -L$(BUILD)/sim -L$(@D) $(if $(filter torch_like,$*),-lc10_cuda -Wl$(comma)-rpath$(comma)'$$ORIGIN') $(if $(filter nvml_sized,$*),-lnvidia-ml) -lcuda $(LDLIBS)

$(BUILD)/tests/tools/%: tests/tools/%.c $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -o $@ $<

# libFuzzer over the dump reader and analyzer, seeded with the golden dumps;
# then over the pod region reader and its views, seeded by mkregion (max_len:
# GPUGUARD_REGION_SIZE + 1, so longer files are tried too).
fuzz: $(BUILD)/tests/tools/mkregion
	@mkdir -p $(BUILD)/fuzz/corpus
	$(FUZZ_CC) -std=gnu11 -g -O1 -Iinclude -fsanitize=fuzzer,address,undefined -o $(BUILD)/fuzz/fuzz_report \
		tests/fuzz/fuzz_report.c $(filter-out tools/main.c,$(TOOL_SRCS)) -ldl
	$(BUILD)/fuzz/fuzz_report -max_total_time=$(FUZZ_TIME) -max_len=65536 -artifact_prefix=$(BUILD)/fuzz/ \
		$(BUILD)/fuzz/corpus tests/golden
	@mkdir -p $(BUILD)/fuzz/corpus-region
	$(BUILD)/tests/tools/mkregion $(BUILD)/fuzz/corpus-region/seed limit=8Gi proc=3:42:python3:1700000000000:0=4096 \
		dev=0:cuda:00112233445566778899aabbccddeeff:8589934592:4096:8192:85899345920:1:2:3 \
		death=0:1:77:trainer:1700000001000:1700000000900:4096:8589934592:2:100:1073741824:17179869184:6
	$(FUZZ_CC) -std=gnu11 -g -O1 -Iinclude -fsanitize=fuzzer,address,undefined -o $(BUILD)/fuzz/fuzz_region \
		tests/fuzz/fuzz_region.c $(filter-out tools/main.c,$(TOOL_SRCS))
	$(BUILD)/fuzz/fuzz_region -max_total_time=$(FUZZ_TIME) -max_len=102401 -artifact_prefix=$(BUILD)/fuzz/region- \
		$(BUILD)/fuzz/corpus-region

$(BUILD)/tests/bench/libpybench.so: tests/bench/pybench.c $(SIM)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -fPIC -shared -o $@ $< -L$(BUILD)/sim -lcuda
$(BENCH): tests/bench/bench.c $(SIM) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -o $@ $< -L$(BUILD)/sim -lcuda -lamdhip64 $(LDLIBS)

$(BUILD)/tests/bench/stall: tests/bench/stall.c $(SIM) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -o $@ $< -L$(BUILD)/sim -lcuda $(LDLIBS)

deps:
	@sh tests/deps.sh

check: deps
	$(MAKE) all
	BUILD=$(BUILD) SAN=$(SAN) SAN_RUNTIME=$(SAN_RUNTIME) REALLIB_NAMES="$(REALLIB_NAMES)" sh tests/run.sh

# The kill soak of pod scope at length (tests/scripts/soak.sh; `make check`
# runs a 20-second one). SOAK_SECONDS and SOAK_KILLS override.
SOAK_SECONDS ?= 600
SOAK_KILLS ?= 6000
soak: lib sim $(TOOL) $(TEST_TOOLS)
	GG_TEST_BUILD=$(CURDIR)/$(BUILD) GG_TEST_SIMDIR=$(CURDIR)/$(BUILD)/sim SAN=$(SAN) \
		GG_TEST_PRELOAD="$(if $(SAN_RUNTIME),$(SAN_RUNTIME) )$(CURDIR)/$(LIB)" \
		SOAK_SECONDS=$(SOAK_SECONDS) SOAK_KILLS=$(SOAK_KILLS) sh tests/scripts/soak.sh

# What CI runs: the suite plainly and under each sanitizer, one summary.
check-all: deps
	sh tests/run_all.sh

# aarch64 alone: cross-built, run under qemu-user (tests/aarch64.sh).
check-aarch64: deps
	sh tests/aarch64.sh

check-gpu: lib $(TOOL) $(REALLIB_BINS) $(GPU_BINS)
	REALLIB_NAMES="$(REALLIB_NAMES)" sh tests/gpu/run.sh

# Instruction counts per pair for the named variants (callgrind; HIP's pairs
# at 1k live apart, not among issue 24's targets), then the
# timed medians of the product as shipped (stacks and history for dumps on),
# the accounting alone (both off) on the two busiest paths, the sync hook with
# a pool charged and with none, the report, and pod scope against process scope.
bench: lib sim $(BENCH) $(BUILD)/tests/bench/stall $(TOOL) $(BUILD)/tests/bench/libpybench.so
	BUILD=$(BUILD) sh tests/bench/count.sh
	BUILD=$(BUILD) PAIR_PATHS="hip hipasync" LIVES=1000 OUT=$(BUILD)/bench-count-hip.txt sh tests/bench/count.sh
	BUILD=$(BUILD) sh tests/bench/pystack.sh
	BUILD=$(BUILD) REPS=3 PATHS="cuMemAlloc_v2 cudart async vmm hip hipasync" sh tests/bench/run.sh
	BUILD=$(BUILD) REPS=3 GG_ENV="GPUGUARD_STACK_DEPTH=0 GPUGUARD_HISTORY=0" VARIANT="accounting only" \
		PATHS="cuMemAlloc_v2 cudart" OUT=$(BUILD)/bench-core.txt sh tests/bench/run.sh
	BUILD=$(BUILD) PATHS=sync LIVES=1000 THREADS=1 OUT=$(BUILD)/bench-sync.txt sh tests/bench/run.sh
	BUILD=$(BUILD) BENCH_NO_POOL=1 PATHS=sync LIVES=1000 THREADS=1 OUT=$(BUILD)/bench-sync-nopool.txt \
		sh tests/bench/run.sh
	BUILD=$(BUILD) sh tests/bench/report_bench.sh
	BUILD=$(BUILD) sh tests/bench/stall_bench.sh
	BUILD=$(BUILD) sh tests/bench/scope_bench.sh

demo: deps
	$(MAKE) lib sim $(EXAMPLES) $(TOOL)
	BUILD=$(BUILD) sh examples/demo.sh

install: lib $(TOOL)
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(TOOL) $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include/gpuguard
	install -m 0755 $(LIB) $(DESTDIR)$(PREFIX)/lib/
	@# libunwind beside the library: stack.c dlopens it from there first
	@# (found through dladdr, like $$ORIGIN), then by soname. Optional.
	@lu=$$(readlink -f "$$($(CC) -print-file-name=libunwind.so.8)" 2>/dev/null); \
	if [ -f "$$lu" ]; then install -m 0644 "$$lu" $(DESTDIR)$(PREFIX)/lib/libunwind.so.8; \
	else echo "gpuguard: libunwind.so.8 not found; dumps will use the frame-pointer unwinder"; fi
	install -m 0644 include/gpuguard.h $(DESTDIR)$(PREFIX)/include/
	install -m 0644 include/gpuguard/*.h $(DESTDIR)$(PREFIX)/include/gpuguard/

# The image's build context (deploy/image/Dockerfile): the sources its build
# stage compiles, and the init container's copy step. Then
#   docker build -t registry.example.com/gpuguard:0.1.0 build/image-context
# tests/scripts/deploy.sh builds and runs the staged tree as the image would.
IMAGE_CONTEXT := build/image-context
IMAGE_SRCS := Makefile LICENSE include interpose tools
# The image's build stage: the library as shipped, and the command linked
# statically, since the startup probe runs it inside the application's
# image, whatever its libc (a dynamic build asks for this machine's glibc,
# 2.34 here, where CUDA images of Ubuntu 20.04 or UBI 8 have 2.31 or 2.28).
# Fresh BUILD only (an existing dynamic command is not relinked).
image-stage:
	$(MAKE) lib
	$(MAKE) $(TOOL) CFLAGS="$(CFLAGS) -static"
	$(MAKE) install PREFIX=/opt/gpuguard
	rm -rf $(DESTDIR)/opt/gpuguard/include
image-context:
	rm -rf $(IMAGE_CONTEXT)
	mkdir -p $(IMAGE_CONTEXT)/src
	cp -R $(IMAGE_SRCS) $(IMAGE_CONTEXT)/src/
	cp deploy/image/Dockerfile deploy/image/install.sh $(IMAGE_CONTEXT)/

FORMAT_SRCS = interpose/*.c interpose/*.h include/*.h include/gpuguard/*.h tests/*/*.c tests/*.h examples/*.c tools/*.c tools/*.h
format:
	clang-format -i $(FORMAT_SRCS)
# What .ci/run checks: every C file as clang-format (.clang-format) writes it.
format-check:
	@clang-format --dry-run --Werror $(FORMAT_SRCS) && echo "format-check: every C file is formatted"

clean:
	rm -rf build
