# agent_state: `make demo` builds the library and runs the demo; `make test` runs every suite.
SHELL := /bin/bash
CARGO ?= cargo
LIBDIR := target/release
LIB := $(LIBDIR)/libagent_state.so
CC ?= cc
CFLAGS_TEST := -std=c99 -Wall -Wextra -Werror -pedantic -g -O1 -Iinclude
LDFLAGS_TEST := -L$(LIBDIR) -Wl,-rpath,$(abspath $(LIBDIR)) -lagent_state -lpthread
BUILD := target/c

.PHONY: all build header demo test test-rust lint test-header-c test-c test-valgrind \
        test-cpp test-python test-go test-reliability soak bench bench-smoke clean

all: build

build: $(LIB)

# Cargo decides what is stale; this target always asks it.
$(LIB): FORCE
	$(CARGO) build --release --lib
FORCE:

header:
	AGENT_STATE_BLESS=1 $(CARGO) test --test header

demo: build
	@mkdir -p $(BUILD)
	$(CC) -std=c99 -Wall -Wextra -Werror -O2 -Iinclude examples/demo.c -o $(BUILD)/demo $(LDFLAGS_TEST)
	$(BUILD)/demo demo.db

test: lint test-rust test-header-c test-c test-valgrind test-cpp test-python test-go \
      test-reliability bench-smoke
	@echo "make test: every suite passed"

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings

test-rust:
	$(CARGO) test

# The header compiles cleanly as C99 and C++11 with every warning an error.
test-header-c:
	@mkdir -p $(BUILD)
	printf '#include "agent_state.h"\nint main(void){return 0;}\n' > $(BUILD)/header_check.c
	$(CC) -std=c99 -Wall -Wextra -Werror -pedantic -Iinclude -c $(BUILD)/header_check.c -o $(BUILD)/header_check_c.o
	cp $(BUILD)/header_check.c $(BUILD)/header_check.cpp
	$(CXX) -std=c++11 -Wall -Wextra -Werror -pedantic -Iinclude -c $(BUILD)/header_check.cpp -o $(BUILD)/header_check_cpp.o

$(BUILD)/test_c: tests/c/test_agent_state.c include/agent_state.h $(LIB)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS_TEST) tests/c/test_agent_state.c -o $@ $(LDFLAGS_TEST)

test-c: build $(BUILD)/test_c $(BUILD)/conformance_c
	$(BUILD)/test_c
	$(BUILD)/conformance_c $(CONFORMANCE_VECTORS)

# The cross-language conformance vectors (tests/conformance/README.md); every binding's test
# target runs the same files.
CONFORMANCE_VECTORS := $(sort $(wildcard tests/conformance/vectors/*.json))
CONFORMANCE_C_SRC := tests/conformance/run_c.c tests/conformance/json_reader.c tests/conformance/vector_text.c

$(BUILD)/conformance_c: $(CONFORMANCE_C_SRC) tests/conformance/json_reader.h tests/conformance/vector_text.h include/agent_state.h $(LIB)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS_TEST) -Itests/conformance $(CONFORMANCE_C_SRC) -o $@ $(LDFLAGS_TEST)

# --fair-sched=yes: memcheck runs one thread at a time; without fair scheduling, threads that
# spin on cheap reads can starve the writers for minutes.
test-valgrind: build $(BUILD)/test_c $(BUILD)/conformance_c
	AGENT_TEST_QUICK=1 valgrind --quiet --fair-sched=yes --error-exitcode=42 --leak-check=full \
	  --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible \
	  --suppressions=tests/c/valgrind.supp $(BUILD)/test_c
	valgrind --quiet --error-exitcode=42 --leak-check=full \
	  --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible \
	  --suppressions=tests/c/valgrind.supp $(BUILD)/conformance_c $(CONFORMANCE_VECTORS)

test-cpp: build
	bash tests/cpp/run.sh

test-python: build
	bash bindings/python/run-tests.sh

test-go: build
	bash bindings/go/run-tests.sh

# Crash, concurrency, hostile-input, fault and sanitizer checks: quick in `make test`, long in
# `make soak` (which prints the counts).
test-reliability: build
	bash tests/reliability/run.sh quick

soak: build
	bash tests/reliability/run.sh soak

# Benchmarks against the code users would write instead; `bench-smoke` runs a few hundred ops
# per case so the harness cannot rot.
bench:
	bash bench/run.sh full

bench-smoke:
	bash bench/run.sh smoke

clean:
	$(CARGO) clean
	rm -f demo.db demo.db-wal demo.db-shm
