# luaretry.  `make` builds the library, the Lua module and the CLI into
# build/ (it needs the libraries below, nothing else); `make demo` and
# `make test` first install the Debian packages that are missing when run
# as root (`make deps`).  `make bench`, `make install PREFIX=... DESTDIR=...`,
# `make fuzz` (each libFuzzer target for FUZZ_SECONDS).
#
# Layers (core/*/, checked by `make check-layers`):
#   include/  the public headers, installed as they are (luaretry_tool.h, the
#             command's, is not); include/abi/ the version script and ABI baseline
#   engine/   clock, RNG, backoff, guards, the call state machine: plain C
#   sandbox/  the metered Lua VM and what scripts may use: policies and the fault server
#   policy/   loading, schema, judgement, requests, workflows: with sandbox/, the only
#             library files with lua.h
#   fleet/    the guards shared by processes, through the local store (a shared-memory
#             file, local_*.c) or Redis: the only files with hiredis.h
#   http/     the libcurl helper, a library of its own (libluaretry-curl): the
#             only library files with curl.h
#   module/   the Lua module; cli/ the command (run/ and simulate/ its wings); faults/
#             the fault server

PREFIX ?= /usr/local
BUILD ?= build
SAN ?=

VERSION := $(shell sed -n 's/^\#define LUARETRY_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' core/include/luaretry.h | paste -sd.)
MAJOR := $(firstword $(subst ., ,$(VERSION)))

DEB_PACKAGES = gcc make pkg-config lua5.4 liblua5.4-dev libcurl4-openssl-dev lua-busted \
  lua-dkjson lua-filesystem curl lua-cjson valgrind openssl mandoc man-db luarocks zsh gzip \
  libhiredis-dev redis-server redis-sentinel clang libclang-rt-dev lua-socket groff-base bsdextrautils \
  nginx-light clang-format libssl-dev abigail-tools tmux time strace
LUA_CFLAGS := $(shell pkg-config --cflags lua5.4 2>/dev/null)
LUA_LIBS := $(shell pkg-config --libs lua5.4 2>/dev/null)
CURL_CFLAGS := $(shell pkg-config --cflags libcurl 2>/dev/null)
CURL_LIBS := $(shell pkg-config --libs libcurl 2>/dev/null)
HIREDIS_CFLAGS := $(shell pkg-config --cflags hiredis 2>/dev/null)
HIREDIS_LIBS := $(shell pkg-config --libs hiredis 2>/dev/null)

ifeq ($(SAN),)
OPT = -O2 -g
else ifeq ($(SAN),1)
OPT = -O1 -g -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer
# A program links UBSan's runtime in: LeakSanitizer scanned libubsan.so's
# 6 MB of writable data at every exit (an ASan CLI run: 87 ms of CPU, 68
# without).  lua_host and the libraries keep the shared runtime.
SAN_EXE = -static-libubsan
else ifeq ($(SAN),thread)
OPT = -O1 -g -fsanitize=thread
else ifeq ($(SAN),fuzzer)
# libFuzzer targets (spec/fuzz/): clang, with ASan and UBSan
CC = clang
OPT = -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
  -fno-omit-frame-pointer
else
$(error SAN=$(SAN): expected SAN=1 (AddressSanitizer + UBSan), SAN=thread or SAN=fuzzer)
endif

# The build tree finds lua/ and policies/ here; `make install` builds in
# build/install for $(PREFIX)/share/luaretry (DATADIR_OBJ, below, again for
# each prefix).
DATADIR ?= $(CURDIR)
WARN = -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE
CFLAGS_CORE = $(WARN) $(OPT) -fPIC -pthread -fvisibility=hidden -MMD -MP \
  -Icore/include -Icore $(LUA_CFLAGS) $(CURL_CFLAGS) $(CFLAGS)
DATADIR_DEF = -DLUARETRY_DATADIR='"$(DATADIR)"'
# Tests and benchmarks find lua/ and policies/ through it as well.
CFLAGS_ALL = $(CFLAGS_CORE) $(DATADIR_DEF) $(SAN_EXE)
# Of the library and the command, only these objects hold the prefix: an
# install for another prefix rebuilds them alone.
DATADIR_OBJ = $(BUILD)/obj/sandbox/find.o $(BUILD)/obj/cli/main.o
LDFLAGS_ALL = $(OPT) -pthread $(LDFLAGS)

obj = $(patsubst core/%.c,$(BUILD)/obj/%.o,$(1))
ENGINE_OBJ = $(call obj,$(wildcard core/engine/*.c))
SANDBOX_OBJ = $(call obj,$(wildcard core/sandbox/*.c))
POLICY_OBJ = $(call obj,$(wildcard core/policy/*.c))
FLEET_OBJ = $(call obj,$(wildcard core/fleet/*.c))
HTTP_OBJ = $(call obj,$(wildcard core/http/*.c))
MODULE_OBJ = $(call obj,$(wildcard core/module/*.c))
CLI_OBJ = $(call obj,$(wildcard core/cli/*.c core/cli/*/*.c))
FAULTS_OBJ = $(call obj,$(wildcard core/faults/*.c))
# libluaretry: the engine, policies and the fleet (Lua, hiredis, libcrypto
# for the fleet scripts' SHA1: no curl);
# libluaretry-curl: the curl helper (core/http), on top of it.  The
# programs of this tree link both archives (LIB_A) and every library.
LIB_OBJ = $(ENGINE_OBJ) $(SANDBOX_OBJ) $(POLICY_OBJ) $(FLEET_OBJ)
CORE_LIBS = $(LUA_LIBS) $(HIREDIS_LIBS) -lcrypto -lm
LIB_LIBS = $(LUA_LIBS) $(CURL_LIBS) $(HIREDIS_LIBS) -lcrypto -lm
LIB_A = $(BUILD)/libluaretry-curl.a $(BUILD)/libluaretry.a
ALL_OBJ = $(LIB_OBJ) $(HTTP_OBJ) $(MODULE_OBJ) $(CLI_OBJ) $(FAULTS_OBJ)

SONAME = libluaretry.so.$(MAJOR)
CURL_SONAME = libluaretry-curl.so.$(MAJOR)
# Only the public functions are exported, each under the version node of
# this map; abi/ holds the ABI baselines `make check-abi` compares with.
LIB_MAP = core/include/abi/libluaretry.map
C_TESTS = step_api inbound deadline null blocking_cancel errors threads abi retry_after inflight overlap curl_io \
  alloc find fleet_url fleet_redis fleet_calls fleet_reply step_hedge simulate_latency fleet_rate \
  fleet_nowait fleet_local fleet_lease fleet_fake guard_rules guard_model admission_totals fork pool grace \
  fleet_fork time_limit fleet_late
C_TEST_BIN = $(C_TESTS:%=$(BUILD)/test_%)
FAULT_BIN = $(BUILD)/faults_serve $(BUILD)/faults_smoke $(BUILD)/relay

.PHONY: all deps demo test tree-before tree-after test-build test-plain test-sanitized test-c test-lua check-layers \
  check-man check-format check-abi abi-baseline format bench install uninstall \
  rock install-rock clean fuzz fuzz-build fuzz-smoke fuzz-merge bench-smoke

all: $(BUILD)/libluaretry.a $(BUILD)/libluaretry.so $(BUILD)/libluaretry-curl.a \
  $(BUILD)/libluaretry-curl.so $(BUILD)/luaretry.so $(BUILD)/luaretry $(BUILD)/luaretry.pc \
  $(BUILD)/luaretry-curl.pc

# Installs what is missing when run as root; otherwise names it and stops.
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else echo "missing Debian packages:$$missing (run: sudo apt-get install$$missing)"; exit 1; fi; \
	fi

demo: deps
	$(MAKE) all
	./$(BUILD)/luaretry demo

# The flags a folder's objects were compiled with: a change (CFLAGS=,
# another compiler) rebuilds them, as git's GIT-CFLAGS does, and a first
# `make install` starts from build/'s objects when they match (seed_objects).
# Read once here, before the per-folder additions below.
OBJ_FLAGS := $(CC) $(CFLAGS_CORE)
$(BUILD)/cflags: FORCE
	@mkdir -p $(@D)
	@echo '$(OBJ_FLAGS)' | cmp -s - $@ || echo '$(OBJ_FLAGS)' > $@
FORCE:

$(BUILD)/obj/%.o: core/%.c $(BUILD)/cflags
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_CORE) -c $< -o $@

# Only core/fleet/ sees hiredis.
$(BUILD)/obj/fleet/%.o: CFLAGS_CORE += $(HIREDIS_CFLAGS)
$(DATADIR_OBJ): CFLAGS_CORE += $(DATADIR_DEF)
# The Lua side of a decision calls liblua a dozen times: through its GOT
# entry, not a PLT stub: a jump fewer each.
$(BUILD)/obj/policy/%.o $(BUILD)/obj/sandbox/%.o: CFLAGS_CORE += -fno-plt

# Header dependencies: the objects', and the C tests' (spec/c/*.h among them).
-include $(ALL_OBJ:.o=.d) $(C_TEST_BIN:=.d)

$(BUILD)/libluaretry.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

# libluaretry.so.MAJOR.MINOR.PATCH, with the soname link and the link
# programs are built against.
$(BUILD)/libluaretry.so: $(LIB_OBJ) $(LIB_MAP)
	$(CC) $(LDFLAGS_ALL) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=$(LIB_MAP) \
	  -Wl,--no-undefined -o $(BUILD)/libluaretry.so.$(VERSION) $(filter %.o,$^) $(CORE_LIBS)
	ln -sf libluaretry.so.$(VERSION) $(BUILD)/$(SONAME)
	ln -sf libluaretry.so.$(VERSION) $@

# The curl helper: its own archive and shared library, on libluaretry.
$(BUILD)/libluaretry-curl.a: $(HTTP_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libluaretry-curl.so: $(HTTP_OBJ) $(LIB_MAP) $(BUILD)/libluaretry.so
	$(CC) $(LDFLAGS_ALL) -shared -Wl,-soname,$(CURL_SONAME) -Wl,--version-script=$(LIB_MAP) \
	  -Wl,--no-undefined -o $(BUILD)/libluaretry-curl.so.$(VERSION) $(filter %.o,$^) \
	  -L$(BUILD) -lluaretry $(CURL_LIBS) -lcrypto -lm
	ln -sf libluaretry-curl.so.$(VERSION) $(BUILD)/$(CURL_SONAME)
	ln -sf libluaretry-curl.so.$(VERSION) $@

# Debian's lua5.4 already holds the Lua library: the module must not link it.
# It exports luaopen_luaretry only (core/module/luaretry.map).
MODULE_MAP = core/module/luaretry.map
$(BUILD)/luaretry.so: $(ENGINE_OBJ) $(SANDBOX_OBJ) $(POLICY_OBJ) $(FLEET_OBJ) $(MODULE_OBJ) $(MODULE_MAP)
	$(CC) $(LDFLAGS_ALL) -shared -Wl,--version-script=$(MODULE_MAP) -o $@ \
	  $(filter %.o,$^) $(HIREDIS_LIBS) -lcrypto -lm

$(BUILD)/luaretry: $(CLI_OBJ) $(FAULTS_OBJ) $(LIB_A)
	$(CC) $(LDFLAGS_ALL) $(SAN_EXE) -o $@ $^ $(LIB_LIBS)

$(BUILD)/luaretry.pc: Makefile core/include/luaretry.h
	@mkdir -p $(BUILD)
	printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: luaretry\nDescription: retry policy engine with sandboxed Lua policies\nVersion: %s\nRequires.private: lua5.4 hiredis libcrypto\nLibs: -L$${libdir} -lluaretry\nLibs.private: -lm -pthread\nCflags: -I$${includedir}\n' \
	  "$(PREFIX)" "$(VERSION)" > $@

$(BUILD)/luaretry-curl.pc: Makefile core/include/luaretry_curl.h
	@mkdir -p $(BUILD)
	printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: luaretry-curl\nDescription: perform libcurl transfers under a luaretry policy\nVersion: %s\nRequires: luaretry = %s libcurl\nRequires.private: libcrypto\nLibs: -L$${libdir} -lluaretry-curl\nCflags: -I$${includedir}\n' \
	  "$(PREFIX)" "$(VERSION)" "$(VERSION)" > $@

# C tests and benchmarks use the public headers only.
$(BUILD)/test_%: spec/c/test_%.c $(LIB_A)
	$(CC) $(CFLAGS_ALL) -Ispec/c -o $@ $< $(LIB_A) $(LIB_LIBS)

# The fleet's tests include its private headers, against a real
# redis-server they start.
$(BUILD)/test_fleet_%: spec/c/test_fleet_%.c $(LIB_A) spec/c/check.h spec/c/redis_helper.h
	$(CC) $(CFLAGS_ALL) $(HIREDIS_CFLAGS) -Icore/fleet -o $@ $< $(LIB_A) $(LIB_LIBS)

# The allocation-failure test fails the N-th allocation of the library's
# own files (and so of the Lua states, whose allocator calls realloc).
WRAP_ALLOC = -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=aligned_alloc
$(BUILD)/test_alloc: spec/c/test_alloc.c $(LIB_A) spec/c/check.h
	$(CC) $(CFLAGS_ALL) -Ispec/c -o $@ $< $(LIB_A) $(LIB_LIBS) $(WRAP_ALLOC)

$(BUILD)/bench_%: spec/bench/%.c $(LIB_A)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIB_A) $(LIB_LIBS)
$(BUILD)/bench_fleet: spec/bench/fleet.c $(LIB_A) spec/c/redis_helper.h
	$(CC) $(CFLAGS_ALL) $(HIREDIS_CFLAGS) -Icore/fleet -Ispec/c -o $@ $< $(LIB_A) $(LIB_LIBS)

# A decision with fleet guards against local ones: public API (the helper
# that starts redis-server speaks hiredis).
$(BUILD)/bench_fleet_decide: spec/bench/fleet_decide.c $(LIB_A) spec/c/redis_helper.h
	$(CC) $(CFLAGS_ALL) $(HIREDIS_CFLAGS) -Ispec/c -o $@ $< $(LIB_A) $(LIB_LIBS)
$(BUILD)/bench_fleet_steps: spec/bench/fleet_steps.c $(LIB_A) spec/c/redis_helper.h
	$(CC) $(CFLAGS_ALL) $(HIREDIS_CFLAGS) -Ispec/c -o $@ $< $(LIB_A) $(LIB_LIBS)

# What the chain of guards costs a decision (spec/bench/README.md, "the
# guards' chain"): `valgrind --tool=callgrind` over it counts instructions.
$(BUILD)/bench_guards_cost $(BUILD)/bench_locks: $(BUILD)/bench_%: spec/bench/%.c $(BUILD)/libluaretry.a
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/libluaretry.a $(LIB_LIBS)

# Programs that embed the library and the fault server together: the
# example event-loop host, connection reuse.
HOST_TESTS = example_host test_reuse test_many_stream test_hedge test_fork_curl
HOST_TEST_BIN = $(HOST_TESTS:%=$(BUILD)/%)
$(BUILD)/example_host $(BUILD)/test_reuse $(BUILD)/test_many_stream $(BUILD)/test_hedge $(BUILD)/test_fork_curl: $(BUILD)/%: spec/c/%.c $(LIB_A) $(FAULTS_OBJ)
	$(CC) $(CFLAGS_ALL) -Ispec/c -o $@ $< $(LIB_A) $(FAULTS_OBJ) $(LIB_LIBS)
$(BUILD)/bench_reuse: spec/bench/reuse.c spec/c/faults_client.h $(LIB_A) $(FAULTS_OBJ)
	$(CC) $(CFLAGS_ALL) -Ispec/c -o $@ $< $(LIB_A) $(FAULTS_OBJ) $(LIB_LIBS)
$(BUILD)/bench_hedge: spec/bench/hedge.c spec/c/faults_client.h $(LIB_A) $(FAULTS_OBJ)
	$(CC) $(CFLAGS_ALL) -Ispec/c -o $@ $< $(LIB_A) $(FAULTS_OBJ) $(LIB_LIBS)

# A middle service for chains of services (spec/chain_spec.lua, the bench):
# the public API and the curl helper, nothing else.
$(BUILD)/relay: spec/c/relay.c $(LIB_A)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIB_A) $(LIB_LIBS)

# busted's interpreter in the sanitized half: the runtime linked, not
# preloaded into every program a spec starts (spec/c/lua_host.c).
$(BUILD)/lua_host: spec/c/lua_host.c
	$(CC) $(LDFLAGS_ALL) $(CFLAGS_CORE) -o $@ $< $(LUA_LIBS)

# The fault server's own test drivers, for spec/faults_spec.lua.
$(BUILD)/faults_%: spec/c/faults_%.c $(FAULTS_OBJ) $(SANDBOX_OBJ) $(ENGINE_OBJ)
	$(CC) $(LDFLAGS_ALL) $(CFLAGS_ALL) -o $@ $^ $(LUA_LIBS) -lm

# What each folder may include, and no cycles between the library's files.
check-layers: $(LIB_OBJ) $(HTTP_OBJ) $(CLI_OBJ) $(FAULTS_OBJ) $(MODULE_OBJ)
	lua5.4 spec/tools/check_layers.lua core $(LIB_OBJ) $(HTTP_OBJ) $(CLI_OBJ) $(FAULTS_OBJ) $(MODULE_OBJ)

# Each half's specs and each C test run under a time limit far above what
# a busy machine needs (the busted half: 5-18 min; a C test: seconds), so
# a hang fails naming itself, never CI's 90 minutes.
SPEC_LIMIT = 3000
C_TEST_LIMIT = 600

test-c: all $(C_TEST_BIN) $(HOST_TEST_BIN)
	@sh spec/tools/c_tests.sh $(C_TEST_LIMIT) $(C_TEST_BIN) $(HOST_TEST_BIN)

test-lua: all $(FAULT_BIN)
	FAULTS_SERVE=$(BUILD)/faults_serve FAULTS_SMOKE=$(BUILD)/faults_smoke RELAY=$(BUILD)/relay \
	  spec/tools/busted_run.sh $(BUILD) $(SPEC_LIMIT) --cpath='$(BUILD)/?.so' --output=utfTerminal

# The ABI of both libraries against its baseline in core/include/abi/
# (libabigail's abidw of the public headers' functions and types):
# check-abi accepts additions (functions, enum values, fields carved from
# reserved room) and fails on anything else (spec/tools/check_abi.lua
# says what); abi-baseline records the ABI as it is now, on purpose, in a
# commit of its own.
ABI_LIBS = libluaretry libluaretry-curl
ABIDW = abidw --no-corpus-path --drop-private-types --header-file core/include/luaretry.h \
  --header-file core/include/luaretry_curl.h
check-abi: $(BUILD)/libluaretry.so $(BUILD)/libluaretry-curl.so
	@mkdir -p $(BUILD)/abi
	@for l in $(ABI_LIBS); do \
	  $(ABIDW) --out-file $(BUILD)/abi/$$l.abi $(BUILD)/$$l.so.$(VERSION) && \
	  lua5.4 spec/tools/check_abi.lua core/include/abi/$$l.abi $(BUILD)/abi/$$l.abi || exit 1; \
	done

abi-baseline: $(BUILD)/libluaretry.so $(BUILD)/libluaretry-curl.so
	@for l in $(ABI_LIBS); do \
	  $(ABIDW) --out-file core/include/abi/$$l.abi $(BUILD)/$$l.so.$(VERSION) || exit 1; \
	  echo "abi-baseline: core/include/abi/$$l.abi"; \
	done

# One style for every C file (.clang-format): check-format fails on a
# file that drifts, format applies the style.
C_SOURCES = $(shell find core spec/c spec/fuzz spec/bench -name '*.[ch]' | sort)
check-format:
	@clang-format --dry-run --Werror $(C_SOURCES) && \
	  echo "check-format: $(words $(C_SOURCES)) C files in the house style"

format:
	@clang-format -i $(C_SOURCES)

# The man pages, every one, linted together from their folder, where each
# finds the pages it refers to.
check-man:
	cd core/cli/man && mandoc -Tlint *.[1-9]

# Everything is built first, two compilers at a time, and nothing beside
# it: check-layers beside it once compiled the same objects in a second
# make, and a link read one half written.  Then the checks; then the plain
# half and the sanitized half run side by side: their specs mostly wait (on
# servers, backoffs, timeouts), so two cores run both in about the time of
# the longer.  Each half's output is shown whole when it ends (-O); if
# either fails, its specs' failures are shown again last, where a log
# that keeps only its ends still has them.
TSAN_TESTS = test_threads test_overlap test_fleet_calls test_hedge test_fleet_rate test_fleet_nowait \
  test_grace
test: deps
	@$(MAKE) --no-print-directory tree-before
	$(MAKE) test-build
	$(MAKE) -j2 check-layers check-man check-format check-abi
	@rm -f build/spec-digest build/asan/spec-digest
	@$(MAKE) -j2 -O test-plain test-sanitized || { spec/tools/busted_run.sh --digests build build/asan; exit 1; }
	@$(MAKE) --no-print-directory tree-after

# The tests leave nothing behind: in a git checkout, `git status` after
# them is what it was before (empty on a fresh clone); build/ is ignored.
# Compared, not required empty, so a tree with edits of one's own can run
# the tests too.
TREE_STATE = $(BUILD)/tree-state
tree-before:
	@mkdir -p $(BUILD)
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
	  git status --porcelain --untracked-files=all -- . ':!$(BUILD)' > $(TREE_STATE); \
	else rm -f $(TREE_STATE); fi

tree-after:
	@if [ -f $(TREE_STATE) ]; then \
	  git status --porcelain --untracked-files=all -- . ':!$(BUILD)' > $(TREE_STATE).after; \
	  if ! cmp -s $(TREE_STATE) $(TREE_STATE).after; then \
	    echo "make test changed the tree (git status before / after):"; \
	    diff $(TREE_STATE) $(TREE_STATE).after; exit 1; fi; \
	  echo "tree-after: git status as before the tests"; fi

test-build:
	$(MAKE) -j2 all $(C_TEST_BIN) $(HOST_TEST_BIN) $(FAULT_BIN)
	$(MAKE) -j2 BUILD=build/asan SAN=1 all $(C_TEST_BIN:$(BUILD)/%=build/asan/%) \
	  $(HOST_TEST_BIN:$(BUILD)/%=build/asan/%) build/asan/faults_serve build/asan/faults_smoke \
	  build/asan/relay build/asan/lua_host

# The ThreadSanitizer and libFuzzer builds (fuzz-smoke's) are made in the
# plain half, beside the sanitized half's tests, which end last and leave
# the CPU idle while they wait on real time; before both they were a
# minute of make test on their own.
test-plain:
	$(MAKE) test-c
	$(MAKE) test-lua
	$(MAKE) BUILD=build/tsan SAN=thread $(TSAN_TESTS:%=build/tsan/%)
	for t in $(TSAN_TESTS); do TSAN_OPTIONS=halt_on_error=1 timeout -k 10 $(C_TEST_LIMIT) ./build/tsan/$$t || exit 1; done
	# stock lua5.4 is not built with ASan: the module's specs run under valgrind
	timeout -k 10 $(C_TEST_LIMIT) valgrind -q --error-exitcode=9 lua5.4 /usr/bin/busted --cpath='build/?.so' \
	  spec/module_spec.lua spec/module_reentry_spec.lua spec/reload_spec.lua
	# the benches mostly wait, the fuzzers use a CPU: side by side (this
	# half now ends last, by ~70 s at idle)
	$(MAKE) -j2 -O fuzz-smoke bench-smoke

# The sanitized half's specs three at a time (the plain half's two): it ends
# last, and its real waits left the CPU idle (on a slow machine make test
# took 769 to 804 s with two, 752 to 762 s with three).
test-sanitized:
	$(MAKE) BUILD=build/asan SAN=1 test-c
	ASAN_OPTIONS=detect_leaks=0 LUARETRY_BIN=build/asan/luaretry \
	  FAULTS_SERVE=build/asan/faults_serve FAULTS_SMOKE=build/asan/faults_smoke RELAY=build/asan/relay \
	  BUSTED_LUA=build/asan/lua_host SPEC_JOBS=$${SPEC_JOBS:-3} \
	  spec/tools/busted_run.sh build/asan $(SPEC_LIMIT) --cpath='build/asan/?.so' --output=utfTerminal

# The fleet's part: its handle's costs (bench_fleet), a decision with
# fleet guards against local ones (bench_fleet_decide), an outage seen
# by 100 processes, fleet / per process / no guards (fleet_run.sh), and by
# 1,000 in waves of 100 with their round trips to Redis beside the model's
# (fleet_scale.sh).
BENCH_BIN = $(BUILD)/bench_decide $(BUILD)/bench_waits $(BUILD)/bench_loop $(BUILD)/bench_reuse \
  $(BUILD)/bench_fleet $(BUILD)/bench_fleet_decide $(BUILD)/bench_fleet_steps $(BUILD)/bench_hedge \
  $(BUILD)/bench_guards_cost $(BUILD)/bench_locks $(BUILD)/relay
bench: deps
	$(MAKE) all $(BENCH_BIN)
	./$(BUILD)/bench_decide
	BENCH_DECIDE=$(BUILD)/bench_decide sh spec/bench/decide_instr.sh
	./$(BUILD)/bench_guards_cost 200000 off
	./$(BUILD)/bench_guards_cost
	./$(BUILD)/bench_guards_cost 200000 guards
	./$(BUILD)/bench_locks
	./$(BUILD)/bench_reuse
	./$(BUILD)/bench_waits
	bash spec/bench/run_vs_curl.sh
	bash spec/bench/batch.sh
	bash spec/bench/million.sh
	bash spec/bench/resume.sh
	BENCH_LOOP=$(BUILD)/bench_loop bash spec/bench/peers.sh
	./$(BUILD)/bench_fleet
	./$(BUILD)/bench_fleet_decide
	./$(BUILD)/bench_fleet_steps
	bash spec/bench/fleet_run.sh
	bash spec/bench/throttle_procs.sh
	bash spec/bench/fleet_scale.sh
	./$(BUILD)/bench_hedge
	RELAY=$(BUILD)/relay bash spec/bench/chain.sh
	bash spec/bench/defaults.sh
	bash spec/bench/limit_req.sh
	bash spec/bench/fleet_rate.sh

# Every benchmark above once at a small size (make test's, in its plain
# half): each runs to its end; the figures are make bench's to judge.
bench-smoke:
	$(MAKE) all $(BENCH_BIN)
	BUILD=$(BUILD) bash spec/bench/smoke.sh

# core/install/install.sh installs under $(DESTDIR)$(PREFIX) and keeps a manifest
# (share/luaretry/install-manifest) that `make uninstall` removes exactly.
INSTALL_ENV = DESTDIR='$(DESTDIR)' PREFIX='$(PREFIX)' BUILD=build/install VERSION=$(VERSION) MAJOR=$(MAJOR)

# A first build in build/install or build/rock copies build/'s objects
# when they were compiled with the same flags: of the library and the
# command only DATADIR_OBJ differ (made again below), and a first install
# then takes seconds, not a whole build.  The copies keep their times (the
# flags file takes build/'s, older than they), and their dependency files
# are retargeted.
seed_objects = $(MAKE) -s BUILD=$(1) $(1)/cflags; \
  if [ ! -d $(1)/obj ] && [ -d build/obj ] && cmp -s build/cflags $(1)/cflags; then \
    cp -Rp build/obj $(1)/obj && touch -r build/cflags $(1)/cflags && \
    find $(1)/obj -name '*.d' -exec sed -i 's|build/obj/|$(1)/obj/|g' {} +; \
  fi

install:
	@$(call seed_objects,build/install)
	# what holds the prefix is made again for this one
	rm -f build/install/obj/sandbox/find.o build/install/obj/cli/main.o build/install/luaretry.pc build/install/luaretry-curl.pc
	$(MAKE) -j2 BUILD=build/install DATADIR=$(PREFIX)/share/luaretry PREFIX=$(PREFIX) all
	$(INSTALL_ENV) sh core/install/install.sh install

uninstall:
	$(INSTALL_ENV) sh core/install/install.sh uninstall

# luarocks (lua/luaretry-VERSION-1.rockspec, build type "make"): the module
# alone, built for the rock's own folder, where the helpers and policies go.
ROCK_PREFIX ?= $(PREFIX)
rock:
	@$(call seed_objects,build/rock)
	rm -f build/rock/obj/sandbox/find.o
	$(MAKE) -j2 BUILD=build/rock DATADIR=$(ROCK_PREFIX)/share/luaretry build/rock/luaretry.so

install-rock:
	install -d $(INST_LIBDIR) $(INST_PREFIX)/share/luaretry/lua $(INST_PREFIX)/share/luaretry/policies
	install -m 755 build/rock/luaretry.so $(INST_LIBDIR)/
	install -m 644 lua/*.lua $(INST_PREFIX)/share/luaretry/lua/
	install -m 644 policies/*.lua $(INST_PREFIX)/share/luaretry/policies/
	# the specs' helpers where the rock's Lua path finds them: require "testing"
	if [ -n "$(INST_LUADIR)" ]; then install -d $(INST_LUADIR) && install -m 644 lua/testing.lua $(INST_LUADIR)/; fi

clean:
	rm -rf build

# Hedging's side of `make bench` alone: the tail with and without a
# hedge, and an overload with a budget (spec/bench/hedge.c).
.PHONY: bench-hedge
bench-hedge: deps
	$(MAKE) all $(BUILD)/bench_hedge
	./$(BUILD)/bench_hedge

# ---- fuzzing: libFuzzer targets in spec/fuzz/, built by
# clang with ASan and UBSan into build/fuzz (SAN=fuzzer).  `make fuzz` runs
# each for FUZZ_SECONDS, one at a time, new inputs going to
# build/fuzz/corpus/NAME; `make fuzz-merge` keeps those that add coverage
# in spec/fuzz/corpus/NAME (-merge=1).  `make test` runs each for
# FUZZ_SMOKE_SECONDS over its committed corpus.
FUZZ_TARGETS = policy retry_after http_parse run_args redis_reply digest
FUZZ_SECONDS ?= 300
FUZZ_SMOKE_SECONDS ?= 5
FUZZ_BIN = $(FUZZ_TARGETS:%=build/fuzz/fuzz_%)
# per target: -close_fd_mask=2 silences parse_run's usage messages (a
# finding is still printed)
FUZZ_OPTS_policy = -dict=spec/fuzz/policy.dict -max_len=4096 -timeout=10
FUZZ_OPTS_retry_after = -dict=spec/fuzz/retry_after.dict -max_len=1024 -timeout=10
FUZZ_OPTS_http_parse = -dict=spec/fuzz/http.dict -max_len=8192 -timeout=10
FUZZ_OPTS_run_args = -dict=spec/fuzz/run_args.dict -max_len=1024 -timeout=10 -close_fd_mask=2
# inputs kept elsewhere in the tree, read as corpus but never copied
FUZZ_EXTRA_policy = policies spec/hostile
FUZZ_OPTS_redis_reply = -dict=spec/fuzz/redis_reply.dict -max_len=4096 -timeout=10
FUZZ_OPTS_digest = -dict=spec/fuzz/digest.dict -max_len=4096 -timeout=10
FUZZ_RUN = ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 LUARETRY_DATADIR=$(CURDIR)

$(BUILD)/fuzz_policy: spec/fuzz/fuzz_policy.c $(LIB_A)
	$(CC) $(CFLAGS_ALL) -fsanitize=fuzzer -o $@ $< $(LIB_A) $(LIB_LIBS)

$(BUILD)/fuzz_retry_after: spec/fuzz/fuzz_retry_after.c $(LIB_A)
	$(CC) $(CFLAGS_ALL) -fsanitize=fuzzer -o $@ $< $(LIB_A) $(LIB_LIBS)

$(BUILD)/fuzz_http_parse: spec/fuzz/fuzz_http_parse.c $(BUILD)/obj/faults/http_parse.o
	$(CC) $(CFLAGS_ALL) -fsanitize=fuzzer -o $@ $^

# the fleet's reply reader and decoders: internal (core/fleet), with hiredis
$(BUILD)/fuzz_redis_reply: spec/fuzz/fuzz_redis_reply.c $(LIB_A)
	$(CC) $(CFLAGS_ALL) $(HIREDIS_CFLAGS) -Icore/fleet -fsanitize=fuzzer -o $@ $< $(LIB_A) $(LIB_LIBS)

# the download path's readers: internal (core/http)
$(BUILD)/fuzz_digest: spec/fuzz/fuzz_digest.c $(LIB_A)
	$(CC) $(CFLAGS_ALL) -Icore/http -fsanitize=fuzzer -o $@ $< $(LIB_A) $(LIB_LIBS)

FUZZ_CLI_OBJ = $(BUILD)/obj/cli/run/args.o $(BUILD)/obj/cli/usage.o $(BUILD)/obj/cli/policy_arg.o \
               $(BUILD)/obj/cli/escape.o $(BUILD)/obj/cli/run/retryopts.o $(BUILD)/obj/cli/run/dirs.o \
               $(BUILD)/obj/cli/number.o
$(BUILD)/fuzz_run_args: spec/fuzz/fuzz_run_args.c $(FUZZ_CLI_OBJ) $(LIB_A)
	$(CC) $(CFLAGS_ALL) -fsanitize=fuzzer -o $@ $^ $(LIB_LIBS)

fuzz-build:
	$(MAKE) BUILD=build/fuzz SAN=fuzzer $(FUZZ_BIN)

# One target for FUZZ_TIME seconds over its committed corpus; new inputs
# go to FUZZ_WORK, a finding stops here with its input in
# build/fuzz/artifacts/.
FUZZ_TIME ?= $(FUZZ_SECONDS)
FUZZ_WORK ?= build/fuzz/corpus
fuzz-run-%:
	@mkdir -p $(FUZZ_WORK)/$* build/fuzz/artifacts
	@echo "== fuzz_$* for $(FUZZ_TIME) s"
	$(FUZZ_RUN) ./build/fuzz/fuzz_$* $(FUZZ_OPTS_$*) -max_total_time=$(FUZZ_TIME) \
	  -print_final_stats=1 -artifact_prefix=build/fuzz/artifacts/$*- \
	  $(FUZZ_WORK)/$* spec/fuzz/corpus/$* $(FUZZ_EXTRA_$*)

# One target at a time: the runs must not share the two cores.
# The guards beside their reference model (spec/model/guards.lua): make
# test runs 100,000 random calls (10,000 under ASan); make fuzz runs
# GUARD_MODEL_FUZZ_CALLS more on a new seed (printed, to replay a failure
# with GUARD_MODEL_SEED=N).
GUARD_MODEL_FUZZ_CALLS ?= 3000000
fuzz: fuzz-build $(BUILD)/test_guard_model
	@for t in $(FUZZ_TARGETS); do $(MAKE) --no-print-directory fuzz-run-$$t || exit 1; done
	GUARD_MODEL_CALLS=$(GUARD_MODEL_FUZZ_CALLS) GUARD_MODEL_SEED=$$(date +%s) ./$(BUILD)/test_guard_model

# The smoke run keeps libFuzzer's output in build/fuzz/smoke/NAME.log and
# shows it only on a finding.
fuzz-smoke: fuzz-build
	rm -rf build/fuzz/smoke
	@mkdir -p build/fuzz/smoke
	@for t in $(FUZZ_TARGETS); do \
	  log=build/fuzz/smoke/$$t.log; \
	  $(MAKE) --no-print-directory fuzz-run-$$t FUZZ_TIME=$(FUZZ_SMOKE_SECONDS) \
	    FUZZ_WORK=build/fuzz/smoke > $$log 2>&1 || { tail -60 $$log; exit 1; }; \
	  echo "fuzz_$$t: $$(grep '^Done' $$log)"; \
	done

# What the long runs found that adds coverage joins the committed corpus.
fuzz-merge: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p build/fuzz/corpus/$$t; \
	  $(FUZZ_RUN) ./build/fuzz/fuzz_$$t -merge=1 spec/fuzz/corpus/$$t build/fuzz/corpus/$$t \
	    2>&1 | tail -2; \
	done
