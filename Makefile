# agent_state: `make demo` builds the library and runs the demo; `make test` runs every suite.
SHELL := /bin/bash
CARGO ?= cargo
# Cargo's build directory: target/, or CARGO_TARGET_DIR when set (as cargo itself does).
LIBDIR := $(or $(CARGO_TARGET_DIR),target)/release
LIB := $(LIBDIR)/libagent_state.so
CC ?= cc
CFLAGS_TEST := -std=c99 -Wall -Wextra -Werror -pedantic -g -O1 -Iinclude
LDFLAGS_TEST := -L$(LIBDIR) -Wl,-rpath,$(abspath $(LIBDIR)) -lagent_state -lpthread
BUILD := target/c

# `make install`: GNU directory variables, all below PREFIX unless set; DESTDIR stages.
PREFIX ?= /usr/local
exec_prefix ?= $(PREFIX)
libdir ?= $(exec_prefix)/lib
includedir ?= $(PREFIX)/include
bindir ?= $(exec_prefix)/bin
pkgconfigdir ?= $(libdir)/pkgconfig
DESTDIR ?=
INSTALL ?= install
STRIP ?= strip
# Run after installing into the live system (no DESTDIR, as root), so the loader finds the new
# library under /usr/local/lib; `make install LDCONFIG=:` skips it.
LDCONFIG ?= ldconfig
# The one version of everything: [workspace.package] in Cargo.toml.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
MAJOR := $(firstword $(subst ., ,$(VERSION)))
SONAME := libagent_state.so.$(MAJOR)
DIST := target/dist

.PHONY: all build header demo check prose test test-suites test-rust test-examples test-pooler test-cache-statement test-tls lint test-header-c test-c test-valgrind \
        test-cpp test-python test-go test-node test-readme docs test-docs test-js test-inspector test-reliability test-powercut soak bench bench-smoke clean \
        dist dist-lib dist-go dist-tarball dist-python dist-sums dist-node install uninstall test-install

all: build

build: $(LIB)

# Cargo decides what is stale; this target always asks it. crates/libagent_state is the crate
# that links the C ABI into libagent_state.so and .a.
$(LIB): FORCE
	$(CARGO) build --release -p libagent_state
FORCE:

header:
	AGENT_STATE_BLESS=1 $(CARGO) test -p agent_state_ffi --test header --test surface

demo: build
	@mkdir -p $(BUILD)
	$(CC) -std=c99 -Wall -Wextra -Werror -O2 -Iinclude examples/demo.c -o $(BUILD)/demo $(LDFLAGS_TEST)
	$(BUILD)/demo demo.db

# The inner loop: format, clippy, every Rust suite and the C suite, on SQLite only. Needs no root,
# no server and no network (the PostgreSQL variants say they were skipped; AGENT_STATE_TEST_NO_SERVERS
# keeps the suites that would start servers of their own from doing so). `make test` is the gate.
check: prose
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	env -u AGENT_STATE_TEST_PG_URI -u CI AGENT_STATE_TEST_NO_SERVERS=1 $(CARGO) test --workspace
	$(MAKE) --no-print-directory build $(BUILD)/test_c
	env -u AGENT_STATE_TEST_PG_URI AGENT_STATE_TEST_BACKEND=sqlite $(BUILD)/test_c
	@echo "make check: passed (SQLite only; make test runs everything, on both backends)"

# Every suite, with a throwaway PostgreSQL server (tests/pg/with-server.sh) whose URI the suites
# find in AGENT_STATE_TEST_PG_URI: each runs against SQLite and PostgreSQL. Around them, the TLS
# servers of tests/pg/tls.sh (on 127.0.0.1 at free ports, certificates made for the run), which
# test-rust's `cargo test --workspace` and test-tls use.
test:
	bash tests/pg/with-server.sh bash tests/pg/tls.sh $(MAKE) --no-print-directory test-suites
	@echo "make test: every suite passed"

test-suites: lint test-rust test-examples test-pooler test-cache-statement test-tls test-header-c test-c test-valgrind test-cpp test-python test-go \
      test-node test-readme test-docs test-js test-inspector test-reliability test-powercut bench-smoke test-install \
      test-json-patch-agree

# The public RFC 6902 suite ran through every language's binding in the suites above
# (tests/conformance/json_patch): each wrote its status per case; they must all agree, and every
# language must have run it.
test-json-patch-agree:
	python3 tests/conformance/json_patch/compare.py --require rust,c,cpp,python,go,node

lint: prose
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Prose for readers: no tracked file refers to an issue by its number (a reason is said in
# words), and the README stays a short front page (the book holds the rest).
prose:
	@if git grep -nIiE 'issue #?[0-9]+' -- .; then \
	  echo "make prose: the lines above refer to an issue by number; say the reason in words" >&2; exit 1; fi
	@lines=$$(wc -l < README.md); if [ "$$lines" -ge 250 ]; then \
	  echo "make prose: README.md has $$lines lines; it stays under 250 (the rest goes to the book, docs/)" >&2; exit 1; fi

# Every Rust suite of the workspace (the core's doc tests too), once. Each test of the library's
# behaviour (and of `agent-state serve`) is declared once and runs as two tests, NAME::sqlite and
# NAME::postgres (#[each_backend], crates/test-support): the PostgreSQL ones on the server
# AGENT_STATE_TEST_PG_URI names (skipped, and said so, without one outside CI).
test-rust:
	$(CARGO) test --workspace

# The core crate's examples (crates/agent_state/examples: one program per concept of its Rust
# API), each run to its end; and its tests with the optional features on (chrono dates, regex).
test-examples:
	@for example in crates/agent_state/examples/*.rs; do \
	  name=$$(basename $$example .rs); echo "+ cargo run -p agent_state --example $$name"; \
	  $(CARGO) run --quiet -p agent_state --example $$name >/dev/null || exit 1; done
	$(CARGO) test -p agent_state --features chrono,regex --test typed
	$(CARGO) clippy -p agent_state --all-targets --features chrono,regex -- -D warnings

# The PostgreSQL variants of the tests test-rust runs (those named ::postgres), and the backend's
# tests of its semantics, through PgBouncer in front of that server, in transaction then in
# session mode (tests/pg/pooler-suites.sh, tests/pg/bouncer.sh: pgbouncer is installed when missing).
test-pooler:
	CARGO=$(CARGO) bash tests/pg/pooler-suites.sh

# The PostgreSQL tests of test-rust and test-pooler again with the library's statements
# prepared (default_query_exec_mode=cache_statement; they run in the default mode, exec):
# directly, and through PgBouncer in session mode (tests/pg/cache-statement.sh).
test-cache-statement:
	CARGO=$(CARGO) bash tests/pg/cache-statement.sh

# The PostgreSQL backend over TLS (crates/agent_state/tests/tls.rs) and a TLS URI through the C
# ABI, the CLI and the Python binding (tests/pg/tls-bindings.sh), against the servers of
# tests/pg/tls.sh: its own, started and stopped here when `make test` has not started them.
test-tls: build
	bash tests/pg/tls.sh bash -c '$(CARGO) test -p agent_state --test tls && bash tests/pg/tls-bindings.sh'

# The header compiles cleanly as C99 and C++11 with every warning an error.
test-header-c:
	@mkdir -p $(BUILD)
	printf '#include "agent_state.h"\nint main(void){return 0;}\n' > $(BUILD)/header_check.c
	$(CC) -std=c99 -Wall -Wextra -Werror -pedantic -Iinclude -c $(BUILD)/header_check.c -o $(BUILD)/header_check_c.o
	cp $(BUILD)/header_check.c $(BUILD)/header_check.cpp
	$(CXX) -std=c++11 -Wall -Wextra -Werror -pedantic -Iinclude -c $(BUILD)/header_check.cpp -o $(BUILD)/header_check_cpp.o

# The C suite: tests/c/main.c runs the tests of the other files of tests/c, in its order.
C_SUITE_SRC := $(sort $(wildcard tests/c/*.c))

$(BUILD)/test_c: $(C_SUITE_SRC) $(wildcard tests/c/*.h) include/agent_state.h $(LIB)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS_TEST) $(C_SUITE_SRC) -o $@ $(LDFLAGS_TEST)

# Each against SQLite, then PostgreSQL when AGENT_STATE_TEST_PG_URI names a server
# (tests/pg/each-backend.sh: skipped without one, a failure under CI=true).
test-c: build $(BUILD)/test_c $(BUILD)/conformance_c $(BUILD)/json_patch_c
	bash tests/pg/each-backend.sh $(BUILD)/test_c
	bash tests/pg/each-backend.sh $(BUILD)/conformance_c $(CONFORMANCE_VECTORS)
	$(JSON_PATCH_CASES_CMD)
	bash tests/pg/each-backend.sh $(BUILD)/json_patch_c $(JSON_PATCH_CASES) $(JSON_PATCH_RESULTS)

# The cross-language conformance vectors (tests/conformance/README.md); every binding's test
# target runs the same files.
CONFORMANCE_VECTORS := $(sort $(wildcard tests/conformance/vectors/*.json))
CONFORMANCE_C_SRC := tests/conformance/run_c.c tests/conformance/json_reader.c tests/conformance/vector_text.c

$(BUILD)/conformance_c: $(CONFORMANCE_C_SRC) tests/conformance/json_reader.h tests/conformance/vector_text.h include/agent_state.h $(LIB)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS_TEST) -Itests/conformance $(CONFORMANCE_C_SRC) -o $@ $(LDFLAGS_TEST)

# The public RFC 6902 suite as cases (tests/conformance/json_patch/cases.py, made from
# ../shared/corpora/json-patch-tests when it is there; the runners skip without them, and fail
# under CI=true), run through the C ABI; each run writes c-BACKEND.txt beside the other
# languages' runs for compare.py.
JSON_PATCH_CASES := target/conformance/json-patch-cases.json
JSON_PATCH_RESULTS := target/conformance/json-patch
JSON_PATCH_CASES_CMD := if [[ -d ../shared/corpora/json-patch-tests ]]; then python3 tests/conformance/json_patch/cases.py $(JSON_PATCH_CASES); fi
JSON_PATCH_C_SRC := tests/conformance/json_patch_c.c tests/conformance/json_reader.c tests/conformance/vector_text.c

$(BUILD)/json_patch_c: $(JSON_PATCH_C_SRC) tests/conformance/json_reader.h tests/conformance/vector_text.h include/agent_state.h $(LIB)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS_TEST) -Itests/conformance $(JSON_PATCH_C_SRC) -o $@ $(LDFLAGS_TEST)

# --fair-sched=yes: memcheck runs one thread at a time; without fair scheduling, threads that
# spin on cheap reads can starve the writers for minutes. SQLite only (test-c runs both backends).
test-valgrind: build $(BUILD)/test_c $(BUILD)/conformance_c $(BUILD)/json_patch_c
	AGENT_STATE_TEST_BACKEND=sqlite AGENT_TEST_QUICK=1 valgrind --quiet --fair-sched=yes --error-exitcode=42 --leak-check=full \
	  --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible \
	  --suppressions=tests/c/valgrind.supp $(BUILD)/test_c
	AGENT_STATE_TEST_BACKEND=sqlite valgrind --quiet --error-exitcode=42 --leak-check=full \
	  --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible \
	  --suppressions=tests/c/valgrind.supp $(BUILD)/conformance_c $(CONFORMANCE_VECTORS)
	$(JSON_PATCH_CASES_CMD)
	AGENT_STATE_TEST_BACKEND=sqlite valgrind --quiet --error-exitcode=42 --leak-check=full \
	  --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible \
	  --suppressions=tests/c/valgrind.supp $(BUILD)/json_patch_c $(JSON_PATCH_CASES) $(JSON_PATCH_RESULTS)

test-cpp: build
	bash tests/cpp/run.sh

test-python: build
	bash bindings/python/run-tests.sh

test-go: build
	bash bindings/go/run-tests.sh

# The Node.js binding (bindings/node/run-tests.sh): builds its addon, runs its tests with Node's
# test runner (each case on SQLite, and on PostgreSQL when AGENT_STATE_TEST_PG_URI names a
# server), type-checks index.d.ts with the TypeScript example and runs the example twice. The
# test tools package-lock.json pins (typescript, @types/node) are installed once with npm ci.
test-node:
	bash bindings/node/run-tests.sh

# The READMEs' examples (tests/readme/README.md): every c, cpp, python and go block of the tracked
# READMEs compiled and run, each in a fresh temporary directory, but those marked fragment; those
# marked postgres only with a server in AGENT_STATE_TEST_PG_URI. The rust blocks of
# crates/agent_state/README.md run as the crate's doc tests (test-rust).
test-readme: build
	bash tests/readme/run.sh
	python3 tests/surface/check_tables.py docs/src/reference/options.md docs/src/reference/statuses.md docs/src/getting-started/python.md docs/src/getting-started/go.md

# The book (docs/, mdBook): built into target/book with zero warnings and zero broken links, its
# generated reference pages checked against the code, the API documentation of each language
# beside it in target/book/api (docs/build.sh). Its examples run with the READMEs' (test-readme).
docs: build
	bash docs/build.sh

# The built book in a real headless Chromium: the front page and a guide load with every image,
# the search finds a page (tests/docs/run.sh; the screenshots go to target/docs-screenshots/).
test-docs: docs
	bash tests/docs/run.sh

# `agent-state serve`'s JavaScript client (crates/agent-state-serve/client), with Node's test
# runner against the real server; then the inspector page in a real headless Chromium (Debian's
# chromium and chromium-driver, installed when missing; the screenshot goes to target/inspector/).
test-js:
	bash crates/agent-state-serve/client/run-tests.sh

test-inspector:
	bash tests/inspector/run.sh

# Crash, concurrency, hostile-input, fault and sanitizer checks: quick in `make test`, long in
# `make soak` (which prints the counts).
test-reliability: build
	bash tests/reliability/run.sh quick

# Power loss under a writing process, SQLite only: 1,000 cuts per synchronous mode, each rebuilt
# from what a disk could hold and checked through the library (tests/powercut/README.md; any
# build: bash tests/powercut/run.sh --lib PATH).
test-powercut: build
	bash tests/powercut/run.sh --cuts 1000

soak: build
	bash tests/reliability/run.sh soak
	AGENT_STATE_FAILOVER_WRITES=300 $(CARGO) test -p agent_state --test postgres failover:: -- --nocapture

# Benchmarks against the code users would write instead; `bench-smoke` runs a few hundred ops
# per case so the harness cannot rot.
bench:
	bash bench/run.sh full

bench-smoke:
	bash bench/run.sh smoke

# The release's artifacts, in target/dist, for users without a Rust toolchain:
#   agent_state-VERSION-linux-x86_64.tar.gz  the C library, headers, relocatable agent_state.pc
#                                            and the command (packaging/c-tarball.sh)
#   agent_state-go-VERSION.zip               the Go module with its prebuilt static archive,
#                                            also unpacked in go/ (packaging/go-module.sh)
#   agent-state-VERSION.tgz                  the npm package (dist-node; needs Node.js:
#                                            `make dist DIST_NODE=` leaves it out)
#   agent_state-VERSION-py3-none-manylinux_*.whl
#                                            the Python wheel with the library and the command
#                                            inside (dist-python, packaging/wheel.sh)
#   SHA256SUMS                               of every .whl, .tgz, .tar.gz and .zip there, written
#                                            last (dist-sums: run it again after adding one)
# SOURCE_DATE_EPOCH (default: the last commit's time) dates every file of the tarball, the
# zip and the wheel, so that they are the same bytes each time.
DIST_NODE ?= dist-node

dist:
	rm -rf $(DIST)
	$(MAKE) --no-print-directory dist-lib dist-go dist-tarball dist-python
	$(if $(DIST_NODE),$(MAKE) --no-print-directory $(DIST_NODE))
	$(MAKE) --no-print-directory dist-sums

dist-go: dist-lib
	bash packaging/go-module.sh $(DIST) $(VERSION)

dist-tarball: dist-lib
	bash packaging/c-tarball.sh $(DIST) $(VERSION)

dist-python: dist-lib
	bash packaging/wheel.sh $(DIST)/lib/libagent_state.so.$(VERSION) $(DIST)/bin/agent-state $(DIST)

dist-sums:
	cd $(DIST) && shopt -s nullglob && files=(*.whl *.tgz *.tar.gz *.zip) && \
	  if [ $${#files[@]} -eq 0 ]; then echo "dist-sums: no artifact in $(DIST)" >&2; exit 1; fi && \
	  sha256sum "$${files[@]}" > SHA256SUMS && cat SHA256SUMS

# What `make install` copies, built and staged in target/dist/lib and bin (replaced; the
# artifacts beside them stay): the shared library as libagent_state.so.VERSION (its SONAME
# checked), the static archive with only agent_* symbols global (packaging/static-archive.sh),
# and the `agent-state` command.
dist-lib:
	rm -f $(LIBDIR)/agent-state
	$(CARGO) build --release --workspace --bins --lib
	@soname="$$(readelf -d $(LIB) | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')"; \
	  if [ "$$soname" != "$(SONAME)" ]; then echo "dist: $(LIB) has SONAME '$$soname', expected $(SONAME)" >&2; exit 1; fi
	rm -rf $(DIST)/lib $(DIST)/bin
	mkdir -p $(DIST)/lib $(DIST)/bin
	# The installed library keeps its dynamic symbols (.dynsym: the agent_* ABI) and drops the
	# static symbol table, as distributions ship shared libraries; target/release keeps it for
	# perf, valgrind and backtraces during development.
	$(STRIP) --strip-unneeded -o $(DIST)/lib/libagent_state.so.$(VERSION) $(LIB)
	bash packaging/static-archive.sh $(LIBDIR)/libagent_state.a $(LIB) $(DIST)/lib/libagent_state.a
	# The command without its static symbol table, as the library (about 1.8 MB less).
	$(STRIP) --strip-unneeded -o $(DIST)/bin/agent-state $(LIBDIR)/agent-state

# The npm package, target/dist/agent-state-VERSION.tgz, with the prebuilt addon inside
# (bindings/node/pack.sh); `make dist` makes it too.
dist-node:
	bash bindings/node/pack.sh

# The C++ wrapper: bindings/cpp/agent_state.hpp includes its parts, installed in agent_state/.
CPP_PARTS := $(sort $(wildcard bindings/cpp/agent_state/*.hpp))

install: dist-lib
	$(INSTALL) -d $(DESTDIR)$(libdir) $(DESTDIR)$(includedir) $(DESTDIR)$(pkgconfigdir)
	$(INSTALL) -m 755 $(DIST)/lib/libagent_state.so.$(VERSION) $(DESTDIR)$(libdir)/
	ln -sfn libagent_state.so.$(VERSION) $(DESTDIR)$(libdir)/$(SONAME)
	ln -sfn $(SONAME) $(DESTDIR)$(libdir)/libagent_state.so
	$(INSTALL) -m 644 $(DIST)/lib/libagent_state.a $(DESTDIR)$(libdir)/
	$(INSTALL) -m 644 include/agent_state.h bindings/cpp/agent_state.hpp $(DESTDIR)$(includedir)/
	$(INSTALL) -d $(DESTDIR)$(includedir)/agent_state
	$(INSTALL) -m 644 $(CPP_PARTS) $(DESTDIR)$(includedir)/agent_state/
	sed -e 's|@prefix@|$(PREFIX)|' -e 's|@libdir@|$(libdir)|' -e 's|@includedir@|$(includedir)|' \
	  -e 's|@version@|$(VERSION)|' packaging/agent_state.pc.in > $(DESTDIR)$(pkgconfigdir)/agent_state.pc
	chmod 644 $(DESTDIR)$(pkgconfigdir)/agent_state.pc
	if [ -f $(DIST)/bin/agent-state ]; then \
	  $(INSTALL) -d $(DESTDIR)$(bindir) && $(INSTALL) -m 755 $(DIST)/bin/agent-state $(DESTDIR)$(bindir)/; fi
	if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v $(firstword $(LDCONFIG)) >/dev/null 2>&1; then \
	  $(LDCONFIG) || true; fi

uninstall:
	rm -f $(DESTDIR)$(libdir)/libagent_state.so $(DESTDIR)$(libdir)/$(SONAME) \
	  $(DESTDIR)$(libdir)/libagent_state.so.$(VERSION) $(DESTDIR)$(libdir)/libagent_state.a \
	  $(DESTDIR)$(includedir)/agent_state.h $(DESTDIR)$(includedir)/agent_state.hpp \
	  $(addprefix $(DESTDIR)$(includedir)/agent_state/,$(notdir $(CPP_PARTS))) \
	  $(DESTDIR)$(pkgconfigdir)/agent_state.pc $(DESTDIR)$(bindir)/agent-state
	rmdir $(DESTDIR)$(includedir)/agent_state 2>/dev/null || true

# Installs into a temporary prefix and uses it from outside the repository: C with pkg-config
# (shared, static, next to the system's SQLite), Go, Python from the sdist, the command; make
# dist's C tarball and Go module zip, unpacked and used with no cargo or rustc on PATH; then
# the npm tarball, installed offline where no cargo or compiler is on PATH (tests/install/node.sh).
test-install:
	bash tests/install/run.sh
	bash tests/install/wheel.sh
	bash tests/install/node.sh

clean:
	$(CARGO) clean
	rm -f demo.db demo.db-wal demo.db-shm
