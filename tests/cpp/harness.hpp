// The harness of the C++ wrapper's tests (bindings/cpp/agent_state.hpp), run by tests/cpp/run.sh:
// TEST, CHECK and their kin, the store helpers (where a test's store lives) and the recorders
// shared by the test files. Defined in harness.cpp; main.cpp runs the tests.
//
// Every TEST runs in its own fresh temporary directory; a failed CHECK records the failure and
// the test goes on. The last line printed is "N passed, M failed"; the exit status is non-zero
// when anything failed. AGENT_TEST_QUICK=1 makes the thread tests smaller (for valgrind).
// AGENT_STATE_TEST_BACKEND=postgres runs them on the PostgreSQL server in
// AGENT_STATE_TEST_PG_URI instead of SQLite files (see open_store; tests/pg/each-backend.sh).
//
// Each test file sets its place in the run with TEST_FILE(n) before its first TEST: main.cpp
// runs the files in that order, and a file's tests in the order they are written, whatever the
// order in which the linker puts the files' static initialisers.
#ifndef AGENT_STATE_TESTS_CPP_HARNESS_HPP
#define AGENT_STATE_TESTS_CPP_HARNESS_HPP

#include "agent_state.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using agent_state::Agent;
using agent_state::Cancel;
using agent_state::Error;
using agent_state::Options;
using agent_state::Status;

// ---------------------------------------------------------------------------------------------
// A minimal test harness.

struct TestCase {
    int file;                 // the TEST_FILE number of the file that defines it
    const char *name;
    void (*fn)();
    const char *sqlite_only;  // why the test is skipped on PostgreSQL, or nullptr
};

// Every test, in the order of registration (main.cpp sorts them by file, stably).
std::vector<TestCase> &registry();

struct Register {
    Register(int file, const char *name, void (*fn)(), const char *sqlite_only = nullptr) {
        registry().push_back({file, name, fn, sqlite_only});
    }
};

extern int g_failures;  // failed checks in the running test
extern fs::path g_dir;  // the running test's private directory
extern bool g_quick;

void fail(const char *file, int line, const std::string &what);
std::string status_text(Status s);
fs::path path_in_dir(const char *name);

// ---- The backend: where a test's store lives ------------------------------------------------
//
// AGENT_STATE_TEST_BACKEND=postgres (with AGENT_STATE_TEST_PG_URI; tests/pg/each-backend.sh
// sets both) runs the tests on a PostgreSQL server. Every test opens its stores through
// open_store() / open_store_json(): on PostgreSQL a file name in the test's directory then
// names an agent on the server, agent_id "cpp_<pid>_<start time>_<test number>_<file name>" (so
// that the same name opens the same store within a test, and reopening works), and ":memory:"
// a fresh agent at each open (private and empty, like an in-memory store). An agent_id the test
// sets itself is appended to the file's agent ("<file's agent>.<id>"): one "file" still holds
// many isolated agents. Tests about SQLite files, paths, ":memory:" and SQLite's write lock are
// SQLITE_ONLY_TEST(name, why): skipped on PostgreSQL, with `why` printed.
extern bool g_pg;
extern std::string g_pg_uri;
extern std::string g_agent_prefix;  // "cpp_<pid>_<start time>_"
extern int g_test_index;            // the running test's number

// The agent_id `where` (":memory:" or a path in the test's directory) stands for on
// PostgreSQL, or "" for any other path (opened as it is).
std::string agent_for(const std::string &where);

// Opens a test store on this run's backend: `where` is ":memory:" or a path in the test's
// directory (see above); any other path is opened as it is.
Agent open_store(const fs::path &place, Options options = Options());

// As open_store, with the options as raw JSON text: on PostgreSQL "agent_id" is added as the
// object's first member (text that is not an object is passed on as it is, and refused by the
// library on both backends).
Agent open_store_json(const fs::path &place, std::string_view options_json);

// The file's place in the run (see the top of this header): TEST_FILE(n) before its tests.
#define TEST_FILE(n)                  \
    namespace {                       \
    constexpr int k_test_file = (n);  \
    }                                 \
    static_assert(true, "")

#define TEST(name)                                                      \
    static void name();                                                 \
    static const Register register_##name(k_test_file, #name, &name);  \
    static void name()

// A test of SQLite files, paths, ":memory:" or SQLite's write lock: skipped on PostgreSQL,
// `why` printed.
#define SQLITE_ONLY_TEST(name, why)                                          \
    static void name();                                                      \
    static const Register register_##name(k_test_file, #name, &name, why);  \
    static void name()

#define CHECK(cond)                                                      \
    do {                                                                 \
        if (!(cond)) fail(__FILE__, __LINE__, "CHECK(" #cond ") failed"); \
    } while (0)

#define CHECK_EQ(a, b)                                                                   \
    do {                                                                                 \
        const auto check_a_ = (a);                                                       \
        const auto check_b_ = (b);                                                       \
        if (!(check_a_ == check_b_)) {                                                   \
            std::ostringstream check_os_;                                                \
            check_os_ << "CHECK_EQ(" #a ", " #b ") failed:\n      left:  " << check_a_ \
                      << "\n      right: " << check_b_;                                  \
            fail(__FILE__, __LINE__, check_os_.str());                                   \
        }                                                                                \
    } while (0)

// Runs `expr`, which must throw agent_state::Error with status `st`; the Error is then available
// as `err` inside the optional block that follows the macro's arguments.
#define CHECK_ERROR(expr, st)                                                                 \
    do {                                                                                      \
        try {                                                                                 \
            (void)(expr);                                                                     \
            fail(__FILE__, __LINE__, "expected " + status_text(st) + " from: " #expr);      \
        } catch (const Error &check_e_) {                                                     \
            if (check_e_.status() != (st)) {                                                  \
                fail(__FILE__, __LINE__,                                                      \
                     "expected " + status_text(st) + " from " #expr ", got " +               \
                         status_text(check_e_.status()) + ": " + check_e_.what());           \
            }                                                                                 \
        } catch (const std::exception &check_e_) {                                            \
            fail(__FILE__, __LINE__,                                                          \
                 std::string("expected agent_state::Error from " #expr ", got std::exception: ") + \
                     check_e_.what());                                                        \
        }                                                                                     \
    } while (0)

// Runs `expr` and returns the agent_state::Error it throws (fails the test when it does not).
Error catch_error(const std::function<void()> &fn, const char *file, int line);
#define CATCH_ERROR(expr) catch_error([&] { (void)(expr); }, __FILE__, __LINE__)

bool contains(std::string_view haystack, std::string_view needle);
std::string read_file(const fs::path &p);

// ---------------------------------------------------------------------------------------------
// Recorders of hook deliveries.

// What an on_state_changed hook saw (recorder() appends one per delivery to `log`).
struct Delivery {
    std::string next, prev;
    std::optional<std::string> patch;
};

agent_state::StateChangedFn recorder(std::vector<Delivery> &log);

// What an on_change hook saw (change_recorder() appends one per delivery to `log`).
struct VersionedDelivery {
    std::uint64_t version;
    std::string prev, next;
    std::optional<std::string> patch;
};

std::ostream &operator<<(std::ostream &os, const VersionedDelivery &d);
bool operator==(const VersionedDelivery &a, const VersionedDelivery &b);
agent_state::ChangeFn change_recorder(std::vector<VersionedDelivery> &log);

// Options with the change log `log` (and synchronous = normal).
Options with_log(agent_state::ChangeLog log);

// The changes_since() text with every "at" value replaced by 0 (the times are checked apart).
std::string without_times(const std::string &json);

#endif
