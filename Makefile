# edgeprof build. `make` builds build/edgeprof; see README.md for the rest.
# Sources are found by wildcard so each pipeline stage only adds files to its
# own folder.

BUILD    ?= build
.DEFAULT_GOAL := all
# V=1 shows the full commands
Q := $(if $(V),,@)
CC       ?= cc
CFLAGS   ?= -O2 -g
STD_FLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fno-strict-aliasing
DEPFLAGS  = -MMD -MP
# json-c: the agent reads the Kubernetes API server's pod list (agent/attribute/k8s_pods.c)
# libgvc: the collector's UI lays control-flow graphs out with Graphviz (collector/web)
# libdebuginfod: the collector fetches binaries' code it was not sent (collector/binaries)
# libiberty (a static archive, no pkg-config): the UI demangles C++ and Rust names (common/elf/demangle.c)
PKGS     := libelf capstone libprotobuf-c libbpf libzstd libcurl libmicrohttpd sqlite3 gnutls json-c libgvc \
	    libdebuginfod
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# Graphviz's dot layout and SVG writer are linked in and named to gvContextPlugins
# (collector/web/web_function.c) rather than loaded from its plugin config, which
# would also load the pango plugin: fontconfig and pango leak per label measured,
# and the collector runs for months. They live in Graphviz's plugin folder.
GV_PLUGINS := $(shell pkg-config --variable=libdir libgvc 2>/dev/null)/graphviz
LDLIBS   := $(PKG_LIBS) -L$(GV_PLUGINS) -Wl,-rpath,$(GV_PLUGINS) -lgvplugin_dot_layout \
	    -lgvplugin_core -lz -lm -lpthread -liberty

GEN      := $(BUILD)/gen
PROTOS   := $(wildcard proto/*.proto)
PROTO_C  := $(patsubst proto/%.proto,$(GEN)/%.pb-c.c,$(PROTOS))
PROTO_H  := $(PROTO_C:.c=.h)
# The BPF side: vmlinux.h from this kernel's BTF, the object, its skeleton.
BPF_SKEL := $(GEN)/edgeprof_bpf.skel.h
GEN_H    := $(PROTO_H) $(BPF_SKEL)
# generated sources are kept, not removed as intermediates
.SECONDARY: $(PROTO_C) $(PROTO_H)

# The LBR emulator plugin is loaded by QEMU, not linked into edgeprof.
PLUGIN_SRCS := $(wildcard agent/source/emulator/plugin/*.c) common/decode/decoder_x86.c \
	       common/decode/decoder_arm64.c common/util/u64map.c
# One static library per top folder, linked in dependency order (cli, agent,
# collector, common) and each checked to link alone against the layers below
# it (scripts/check_layers.sh): the linker, not only the include rules
# (tests/layout), refuses a call the wrong way (common into agent, agent into
# collector). The protobuf code is common's: every layer reads the messages.
LAYERS     := cli agent collector common
$(foreach l,$(LAYERS),$(eval $(l)_SRCS := $(filter-out cli/main.c agent/source/emulator/plugin/%,\
	$(shell find $(l) -name '*.c' | sort))))
LIB_SRCS   := $(foreach l,$(LAYERS),$($(l)_SRCS))
MAIN_SRC   := cli/main.c
TEST_SRCS  := $(sort $(wildcard tests/unit/test_*.c))
# includes are written from the repository root: "common/decode/decoder.h"
INCLUDES   := -I. -I$(GEN) $(PKG_CFLAGS)

# Two flavours share the rules: the normal one, and ASan+UBSan for tests.
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
# The normal flavour's objects also carry GCC's LTO bytecode: build/edgeprof
# is linked with link-time optimisation (the import's stages call each other
# per branch entry across files: -17% instructions per sample, see issue 17),
# while unit tests and benches link the plain code of the same objects and
# stay quick to build. LTO_FLAGS= turns it off (a compiler without it).
LTO_FLAGS ?= -flto=auto -ffat-lto-objects
LTO_LINK  := $(if $(LTO_FLAGS),-flto=auto)

define flavour
$(1)_DIR   := $(BUILD)/$(2)
$(1)_OBJS  := $$(patsubst %.c,$$($(1)_DIR)/%.o,$$(LIB_SRCS)) \
              $$(patsubst $(GEN)/%.c,$$($(1)_DIR)/gen/%.o,$$(PROTO_C))
# the archives in link order
$(1)_LIBS  := $$(foreach l,$(LAYERS),$$($(1)_DIR)/lib$$(l).a)
$(1)_TESTS := $$(patsubst tests/unit/%.c,$$($(1)_DIR)/tests/%,$$(TEST_SRCS))

$$($(1)_DIR)/%.o: %.c $$(GEN_H) | $$($(1)_DIR)
	@mkdir -p $$(dir $$@)
	@echo "  CC      $$@"
	$$(Q)$$(CC) $$(STD_FLAGS) $$(CFLAGS) $(3) $(4) $$(DEPFLAGS) $$(INCLUDES) -c $$< -o $$@

$$($(1)_DIR)/gen/%.o: $(GEN)/%.c $$(PROTO_H)
	@mkdir -p $$(dir $$@)
	@echo "  CC      $$@"
	$$(Q)$$(CC) -std=c11 $$(CFLAGS) $(3) $(4) $$(INCLUDES) -c $$< -o $$@

$$($(1)_DIR)/libcli.a: $$(patsubst %.c,$$($(1)_DIR)/%.o,$$(cli_SRCS))
$$($(1)_DIR)/libagent.a: $$(patsubst %.c,$$($(1)_DIR)/%.o,$$(agent_SRCS))
$$($(1)_DIR)/libcollector.a: $$(patsubst %.c,$$($(1)_DIR)/%.o,$$(collector_SRCS))
$$($(1)_DIR)/libcommon.a: $$(patsubst %.c,$$($(1)_DIR)/%.o,$$(common_SRCS)) \
	$$(patsubst $(GEN)/%.c,$$($(1)_DIR)/gen/%.o,$$(PROTO_C))
$$($(1)_LIBS):
	@rm -f $$@
	@echo "  AR      $$@"
	$$(Q)ar rcs $$@ $$^

$$($(1)_DIR)/tests/%: tests/unit/%.c $$($(1)_LIBS) tests/unit/test_util.h tests/unit/test_samples.h
	@mkdir -p $$(dir $$@)
	@echo "  LD      $$@"
	$$(Q)$$(CC) $$(STD_FLAGS) $$(CFLAGS) $(3) $$(DEPFLAGS) $$(INCLUDES) $$< $$($(1)_LIBS) -lcmocka $$(LDLIBS) $(3) -o $$@

$$($(1)_DIR):
	@mkdir -p $$@
-include $$($(1)_OBJS:.o=.d)
endef

$(eval $(call flavour,REL,rel,,$(LTO_FLAGS)))
$(eval $(call flavour,SAN,asan,$(SAN_FLAGS)))

.PHONY: all deps test unit-tests run bench format format-check clean

all: $(BUILD)/edgeprof $(BUILD)/edgeprof-lbr.so

$(BUILD)/edgeprof-lbr.so: $(PLUGIN_SRCS) $(wildcard agent/source/emulator/*.h agent/source/emulator/plugin/*.h agent/decode/*.h common/decode/*.h common/util/*.h) bpf/edgeprof_record.h
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(STD_FLAGS) $(CFLAGS) -fPIC -shared -fvisibility=hidden $(INCLUDES) $(PLUGIN_SRCS) \
		$(shell pkg-config --libs capstone) -lpthread -o $@

# libbpf's PT_REGS_* and the syscall numbers differ per architecture: the
# host's, as vmlinux.h is the host kernel's
BPF_ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')

$(GEN)/vmlinux.h:
	@mkdir -p $(GEN)
	@echo "  BTF     $@"
	$(Q)bpftool btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(BUILD)/bpf/edgeprof.bpf.o: bpf/edgeprof.bpf.c bpf/edgeprof_record.h $(GEN)/vmlinux.h
	@mkdir -p $(dir $@)
	@echo "  BPF     $@"
	$(Q)clang -g -O2 -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -D__BPF__ -I$(GEN) -Ibpf -c $< -o $@

$(BPF_SKEL): $(BUILD)/bpf/edgeprof.bpf.o
	@echo "  SKEL    $@"
	$(Q)bpftool gen skeleton $< name edgeprof_bpf > $@.tmp && mv $@.tmp $@

# every generated file depends on all the .proto files: they import each other
$(GEN)/%.pb-c.c $(GEN)/%.pb-c.h: proto/%.proto $(PROTOS)
	@mkdir -p $(GEN)
	protoc-c --c_out=$(GEN) --proto_path=proto $<

$(BUILD)/edgeprof: $(MAIN_SRC) $(REL_LIBS) $(REL_DIR)/layers.ok
	@echo "  LD      $@"
	$(Q)$(CC) $(STD_FLAGS) $(CFLAGS) $(LTO_LINK) $(INCLUDES) $< $(REL_LIBS) $(LDLIBS) -o $@

$(BUILD)/edgeprof-asan: $(MAIN_SRC) $(SAN_LIBS)
	@echo "  LD      $@"
	$(Q)$(CC) $(STD_FLAGS) $(CFLAGS) $(SAN_FLAGS) $(INCLUDES) $< $(SAN_LIBS) $(LDLIBS) $(SAN_FLAGS) -o $@

# each layer linked whole against the ones below it only (scripts/check_layers.sh)
CHECK_LAYERS = CC="$(CC)" LDLIBS="$(LDLIBS)" scripts/check_layers.sh
$(REL_DIR)/layers.ok: $(REL_LIBS) scripts/check_layers.sh
	@echo "  LAYERS  $(REL_DIR)"
	$(Q)$(CHECK_LAYERS) $(REL_DIR)
	@touch $@
# the same on the libraries in LAYERS_DIR (tests/integration/test_layout.sh)
LAYERS_DIR ?= $(REL_DIR)
.PHONY: check-layers
check-layers:
	$(Q)$(CHECK_LAYERS) $(LAYERS_DIR)

# Installs missing Debian packages (apt-get) on a fresh Debian 12 machine.
deps:
	@scripts/setup-deps.sh

unit-tests: $(REL_TESTS) $(SAN_TESTS)

# every bench program is built too, so a change that breaks one fails here
test: deps
	@$(MAKE) --no-print-directory all $(BUILD)/edgeprof-asan unit-tests $(LOAD_GEN) $(CHURN) \
		$(BENCH_BINS)
	@tests/run.sh $(BUILD)

run: deps
	@$(MAKE) --no-print-directory all
	@scripts/run-demo.sh $(BUILD)

BENCH_SRCS := $(sort $(wildcard bench/*.c))
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRCS))

$(BUILD)/bench/%: bench/%.c $(REL_LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(STD_FLAGS) $(CFLAGS) $(INCLUDES) $< $(REL_LIBS) $(LDLIBS) -o $@

bench: deps
	@$(MAKE) --no-print-directory all $(BENCH_BINS)
	@bench/run.sh $(BUILD)

# Load (issue 12 part 2, bench/load/run.sh): LOAD_AGENTS (500) agents post real batches to one
# collector on loopback for LOAD_S (180) seconds, SQLite then ClickHouse (LOAD_STORES).
LOAD_GEN := $(BUILD)/bench-load/load_gen
$(LOAD_GEN): bench/load/load_gen.c $(REL_LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(STD_FLAGS) $(CFLAGS) $(INCLUDES) $< $(REL_LIBS) $(LDLIBS) -o $@

# Soak (issue 12 part 3, bench/soak/run.sh): agent and collector (ASan builds) for SOAK_S
# (1800) seconds with churn; RSS and descriptors every 10 s, slopes, exact accounting. Root.
SOAK_S ?= 1800
CHURN := $(BUILD)/bench-soak/churn
$(CHURN): bench/soak/churn.c
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(STD_FLAGS) $(CFLAGS) $< -ldl -o $@

.PHONY: soak
soak: deps
	@$(MAKE) --no-print-directory all $(BUILD)/edgeprof-asan $(CHURN)
	@SOAK_S=$(SOAK_S) bench/soak/run.sh $(BUILD)

.PHONY: bench-load
bench-load: deps
	@$(MAKE) --no-print-directory all $(LOAD_GEN)
	@bench/load/run.sh $(BUILD)

# The capacity model's inputs (bench/capacity/measure.sh, docs/capacity.md): replays of real
# recordings into both stores and five short load runs (~14 min on a 2-core VM), then the model.
.PHONY: bench-capacity
bench-capacity: deps
	@$(MAKE) --no-print-directory all $(LOAD_GEN)
	@bench/capacity/measure.sh $(BUILD)

# FDO on real programs (bench/fdo/run.sh): Debian sources via apt-get (root, like deps), BOLT
# and AutoFDO variants measured under cachegrind. Long; cached under $(BUILD)/fdo.
.PHONY: bench-fdo
bench-fdo: deps
	@$(MAKE) --no-print-directory all
	@bench/fdo/run.sh $(BUILD)

# libFuzzer targets (issue 12), one per reader of untrusted bytes: tests/fuzz/fuzz_NAME.c
# each, linked with the product's own code built a third time (clang, libFuzzer's coverage,
# ASan+UBSan). `make fuzz FUZZ_S=N` (FUZZ_SECONDS is the older name) runs each target N s
# (60) on a copy of its committed corpus (tests/fuzz/corpus/NAME) and prints one line per
# target, `fuzz_NAME: N execs, M crashes, ...`; FUZZ_TARGETS="a b" picks some; FUZZ_RUNS=N
# ends a target at N inputs run, before its time when it is that fast; FUZZ_JOBS=J runs J
# processes of a target on its one corpus, one per core. New inputs
# stay in $(BUILD)/fuzz/corpus/NAME, crashes in $(BUILD)/fuzz/crashes/NAME (keep each
# one as tests/fuzz/corpus/NAME/regress_WHAT once fixed: `make test` replays them).
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_S       ?= $(FUZZ_SECONDS)
FUZZ_ALL     := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_TARGETS ?= $(FUZZ_ALL)
FUZZ_BINS    := $(patsubst %,$(BUILD)/fuzz/fuzz_%,$(FUZZ_ALL))
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all
# no -Werror: clang warns where gcc, the product's compiler, does not
FUZZ_FLAGS   := -g -O1 -std=c11 -D_GNU_SOURCE -Wall -Wextra -fno-strict-aliasing \
                -fno-omit-frame-pointer $(FUZZ_SAN)
FUZZ_OBJS    := $(patsubst %.c,$(BUILD)/fuzz/obj/%.o,$(LIB_SRCS)) \
                $(patsubst $(GEN)/%.c,$(BUILD)/fuzz/obj/gen/%.o,$(PROTO_C))
FUZZ_LIB     := $(BUILD)/fuzz/libedgeprof-fuzz.a

$(BUILD)/fuzz/obj/%.o: %.c $(GEN_H)
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $@"
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link $(DEPFLAGS) $(INCLUDES) -c $< -o $@

$(BUILD)/fuzz/obj/gen/%.o: $(GEN)/%.c $(PROTO_H)
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $@"
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link $(INCLUDES) -c $< -o $@

$(FUZZ_LIB): $(FUZZ_OBJS)
	@rm -f $@
	@echo "  AR      $@"
	$(Q)ar rcs $@ $^
-include $(FUZZ_OBJS:.o=.d)

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_util.h $(FUZZ_LIB)
	@echo "  FUZZ    $@"
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -DEP_SOURCE_DIR=\"$(CURDIR)\" $(INCLUDES) \
		$< $(FUZZ_LIB) $(LDLIBS) -o $@

# writes the ingest target's seed corpus (tests/fuzz/corpus/ingest) from its own helper
$(BUILD)/fuzz/fuzz_ingest_seeds: tests/fuzz/fuzz_ingest.c $(FUZZ_LIB)
	@mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -DEP_FUZZ_WRITE_SEEDS $(INCLUDES) $< $(FUZZ_LIB) $(LDLIBS) -o $@

.PHONY: fuzz fuzz-build fuzz-seeds
fuzz-build: $(FUZZ_BINS)
fuzz: fuzz-build
	@tests/fuzz/run.sh $(BUILD) $(FUZZ_S) $(FUZZ_TARGETS)
fuzz-seeds: $(BUILD)/fuzz/fuzz_ingest_seeds
	@mkdir -p tests/fuzz/corpus/ingest
	$(BUILD)/fuzz/fuzz_ingest_seeds tests/fuzz/corpus/ingest

FORMAT_FILES = $(shell find common agent bpf collector cli tests bench -name '*.[ch]' 2>/dev/null)
format:
	clang-format -i $(FORMAT_FILES)
format-check:
	clang-format --dry-run --Werror $(FORMAT_FILES)

clean:
	rm -rf $(BUILD)
