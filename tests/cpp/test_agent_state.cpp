// Tests of the C++ wrapper (bindings/cpp/agent_state.hpp). Run by tests/cpp/run.sh.
//
// Every TEST runs in its own fresh temporary directory; a failed CHECK records the failure and
// the test goes on. The last line printed is "N passed, M failed"; the exit status is non-zero
// when anything failed. AGENT_TEST_QUICK=1 makes the thread tests smaller (for valgrind).
// AGENT_STATE_TEST_BACKEND=postgres runs them on the PostgreSQL server in
// AGENT_STATE_TEST_PG_URI instead of SQLite files (see open_store; tests/pg/each-backend.sh).

#include "agent_state.hpp"

#include <algorithm>
#include <atomic>
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
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using agent_state::Agent;
using agent_state::Error;
using agent_state::Options;
using agent_state::Status;

namespace second_tu {
struct Failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};
agent_state::HookId register_throwing_hook(agent_state::Agent &agent);
void set_throwing_validator(agent_state::Agent &agent);
std::string write_from_second_tu(agent_state::Agent &agent, std::string_view patch);
}  // namespace second_tu

// ---------------------------------------------------------------------------------------------
// A minimal test harness.

namespace {

struct TestCase {
    const char *name;
    void (*fn)();
    const char *sqlite_only;  // why the test is skipped on PostgreSQL, or nullptr
};

std::vector<TestCase> &registry() {
    static std::vector<TestCase> tests;
    return tests;
}

struct Register {
    Register(const char *name, void (*fn)(), const char *sqlite_only = nullptr) {
        registry().push_back({name, fn, sqlite_only});
    }
};

int g_failures = 0;       // failed checks in the running test
fs::path g_dir;           // the running test's private directory
bool g_quick = false;

void fail(const char *file, int line, const std::string &what) {
    ++g_failures;
    std::cout << "    " << file << ":" << line << ": " << what << "\n";
}

std::string status_text(Status s) {
    return std::string(agent_state::status_name(s)) + " (" +
           std::to_string(static_cast<int>(s)) + ")";
}

fs::path path_in_dir(const char *name) { return g_dir / name; }

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
bool g_pg = false;
std::string g_pg_uri;
std::string g_agent_prefix;           // "cpp_<pid>_<start time>_"
int g_test_index = 0;                 // the running test's number
std::atomic<unsigned> g_memory_stores{0};

// The agent_id `where` (":memory:" or a path in the test's directory) stands for on
// PostgreSQL, or "" for any other path (opened as it is).
std::string agent_for(const std::string &where) {
    const std::string test = g_agent_prefix + std::to_string(g_test_index) + "_";
    if (where == ":memory:") return test + "mem" + std::to_string(++g_memory_stores);
    const fs::path p(where);
    if (p.parent_path() != g_dir) return std::string();
    static const char hex[] = "0123456789ABCDEF";
    std::string id = test;
    for (const char ch : p.filename().string()) {
        const auto c = static_cast<unsigned char>(ch);
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            c == '.' || c == '-' || c == '_') {
            id.push_back(ch);
        } else {
            id.push_back('%');
            id.push_back(hex[c >> 4]);
            id.push_back(hex[c & 0xf]);
        }
    }
    return id;
}

// Opens a test store on this run's backend: `where` is ":memory:" or a path in the test's
// directory (see above); any other path is opened as it is.
Agent open_store(const fs::path &place, Options options = Options()) {
    const std::string where = place.string();
    if (!g_pg) return Agent(where, options);
    std::string id = agent_for(where);
    if (id.empty()) return Agent(where, options);
    if (options.agent_id) id += "." + *options.agent_id;
    options.agent_id = id;
    return Agent(g_pg_uri, options);
}

// As open_store, with the options as raw JSON text: on PostgreSQL "agent_id" is added as the
// object's first member (text that is not an object is passed on as it is, and refused by the
// library on both backends).
Agent open_store_json(const fs::path &place, std::string_view options_json) {
    const std::string where = place.string();
    if (!g_pg) return Agent::open(where, options_json);
    const std::string id = agent_for(where);
    if (id.empty()) return Agent::open(where, options_json);
    std::size_t i = 0;
    while (i < options_json.size() && options_json[i] == ' ') ++i;
    if (i == options_json.size() || options_json[i] != '{') {
        return Agent::open(g_pg_uri, options_json);
    }
    std::string_view rest = options_json.substr(i + 1);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    std::string text = "{\"agent_id\":" + agent_state::json_quote(id);
    if (rest.empty() || rest.front() != '}') text += ",";
    text += rest;
    return Agent::open(g_pg_uri, text);
}

}  // namespace

#define TEST(name)                                         \
    static void name();                                    \
    static const Register register_##name(#name, &name);   \
    static void name()

// A test of SQLite files, paths, ":memory:" or SQLite's write lock: skipped on PostgreSQL,
// `why` printed.
#define SQLITE_ONLY_TEST(name, why)                              \
    static void name();                                          \
    static const Register register_##name(#name, &name, why);    \
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
static Error catch_error(const std::function<void()> &fn, const char *file, int line) {
    try {
        fn();
    } catch (const Error &e) {
        return e;
    } catch (const std::exception &e) {
        fail(file, line, std::string("expected agent_state::Error, got ") + e.what());
        return Error(Status::ok, "");
    }
    fail(file, line, "expected agent_state::Error, nothing thrown");
    return Error(Status::ok, "");
}
#define CATCH_ERROR(expr) catch_error([&] { (void)(expr); }, __FILE__, __LINE__)

static bool contains(std::string_view haystack, std::string_view needle) {
    return haystack.find(needle) != std::string_view::npos;
}

static std::string read_file(const fs::path &p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// ---------------------------------------------------------------------------------------------
// Compile-time properties.

static_assert(!std::is_copy_constructible_v<Agent>, "Agent is move-only");
static_assert(!std::is_copy_assignable_v<Agent>, "Agent is move-only");
static_assert(std::is_nothrow_move_constructible_v<Agent>, "Agent moves without throwing");
static_assert(std::is_nothrow_move_assignable_v<Agent>, "Agent moves without throwing");
static_assert(std::is_nothrow_destructible_v<Agent>, "Agent's destructor does not throw");
static_assert(!std::is_copy_constructible_v<agent_state::Buffer>, "Buffer is move-only");
static_assert(std::is_nothrow_move_constructible_v<agent_state::Buffer>, "Buffer moves");
static_assert(!std::is_copy_constructible_v<agent_state::Subscription>, "Subscription is move-only");
static_assert(std::is_nothrow_move_constructible_v<agent_state::Subscription>, "Subscription moves");
static_assert(std::is_base_of_v<std::runtime_error, Error>, "Error is a std::runtime_error");
static_assert(!std::is_convertible_v<const char *, Agent>, "opening is explicit");

// ---------------------------------------------------------------------------------------------
// Semantics.

TEST(fresh_agent_reads_empty_object) {
    Agent agent = open_store(":memory:");
    CHECK(agent.is_open());
    CHECK(static_cast<bool>(agent));
    CHECK(agent.handle() != 0);
    CHECK_EQ(agent.get_state(), "{}");
}

TEST(version_and_status_names) {
    CHECK(!agent_state::version().empty());
    CHECK_EQ(std::string(agent_state::status_name(Status::codec)), "AGENT_ERR_CODEC");
    CHECK_EQ(std::string(agent_state::status_name(Status::ok)), "AGENT_OK");
    CHECK_EQ(std::string(agent_state::status_name(static_cast<Status>(1234))), "AGENT_ERR_UNKNOWN");
}

TEST(set_state_merges_and_returns_full_state) {
    Agent agent = open_store(":memory:");
    CHECK_EQ(agent.set_state(R"({"status":"idle","at":0})"), R"({"status":"idle","at":0})");
    CHECK_EQ(agent.set_state(R"({"status":"processing"})"), R"({"status":"processing","at":0})");
    CHECK_EQ(agent.get_state(), R"({"status":"processing","at":0})");
    // Whitespace in the input does not survive: outputs are compact.
    CHECK_EQ(agent.set_state("  {\n \"at\" : 5 }\t"), R"({"status":"processing","at":5})");
}

TEST(merge_is_rfc7396_with_nested_null_deletion) {
    Agent agent = open_store(":memory:");
    agent.replace_state(
        R"({"status":"processing","job":{"id":"j1","step":2,"note":"retrying"}})");
    // The reference example: nested objects merge, null deletes, untouched keys survive.
    CHECK_EQ(agent.set_state(R"({"job":{"step":3,"note":null}})"),
             R"({"status":"processing","job":{"id":"j1","step":3}})");
    // Top-level null deletes; deleting an absent member is a no-op.
    CHECK_EQ(agent.set_state(R"({"status":null,"absent":null})"), R"({"job":{"id":"j1","step":3}})");
    // Arrays and scalars replace whole; an object replaces a scalar.
    CHECK_EQ(agent.set_state(R"({"list":[1,2,3]})"), R"({"job":{"id":"j1","step":3},"list":[1,2,3]})");
    CHECK_EQ(agent.set_state(R"({"list":[{"a":null}]})"),
             R"({"job":{"id":"j1","step":3},"list":[{"a":null}]})");
    CHECK_EQ(agent.set_state(R"({"job":"done"})"), R"({"job":"done","list":[{"a":null}]})");
    CHECK_EQ(agent.set_state(R"({"job":{"x":1}})"), R"({"job":{"x":1},"list":[{"a":null}]})");
    // A new nested object is built from the patch with its nulls removed.
    CHECK_EQ(agent.set_state(R"({"n":{"a":null,"b":{"c":null,"d":1}}})"),
             R"({"job":{"x":1},"list":[{"a":null}],"n":{"b":{"d":1}}})");
    // Deep deletion leaves the (now empty) parent.
    CHECK_EQ(agent.set_state(R"({"n":{"b":{"d":null}},"job":null,"list":null})"), R"({"n":{"b":{}}})");
    // An empty patch changes nothing.
    CHECK_EQ(agent.set_state("{}"), R"({"n":{"b":{}}})");
}

TEST(replace_state_keeps_nothing_of_the_previous_state) {
    Agent agent = open_store(":memory:");
    agent.set_state(R"({"a":1,"b":{"c":2}})");
    CHECK_EQ(agent.replace_state(R"({"z":[true,false,null]})"), R"({"z":[true,false,null]})");
    CHECK_EQ(agent.get_state(), R"({"z":[true,false,null]})");
    CHECK_EQ(agent.replace_state("{}"), "{}");
    CHECK_EQ(agent.get_state(), "{}");
}

TEST(unicode_and_escapes_round_trip) {
    Agent agent = open_store(":memory:");
    const std::string text = "quote \" backslash \\ newline \n tab \t bell \x07 \xc3\xa9 \xf0\x9f\x98\x80";
    const std::string patch = "{\"text\":" + agent_state::json_quote(text) + "}";
    const std::string state = agent.set_state(patch);
    CHECK(contains(state, "\\\""));
    CHECK(contains(state, "\\n"));
    CHECK(contains(state, "\xc3\xa9"));
    CHECK_EQ(agent_state::json_quote("a\"b\\c\x01"), "\"a\\\"b\\\\c\\u0001\"");
    CHECK_EQ(agent_state::json_quote(""), "\"\"");
}

TEST(initial_state_option_is_shown_but_not_stored) {
    const auto file = path_in_dir("initial.db");
    {
        Options options;
        options.initial_state = R"({"status":"idle","lastReply":"","at":0})";
        Agent agent = open_store(file, options);
        CHECK_EQ(agent.get_state(), R"({"status":"idle","lastReply":"","at":0})");
    }
    {
        // Nothing was stored by reading: another initial state shows through.
        Options options;
        options.initial_state = R"({"other":true})";
        Agent agent = open_store(file, options);
        CHECK_EQ(agent.get_state(), R"({"other":true})");
        // The first write merges into the initial state and stores the result.
        CHECK_EQ(agent.set_state(R"({"n":1})"), R"({"other":true,"n":1})");
    }
    {
        Options options;
        options.initial_state = R"({"ignored":1})";
        Agent agent = open_store(file, options);
        CHECK_EQ(agent.get_state(), R"({"other":true,"n":1})");
    }
}

TEST(state_persists_across_reopen) {
    const auto file = path_in_dir("persist.db");
    {
        Agent agent = open_store(file);
        agent.set_state(R"({"a":1,"nested":{"b":[1,2]}})");
        agent.set_state(R"({"nested":{"c":"x"}})");
        agent.close();
        CHECK(!agent.is_open());
    }
    {
        Agent agent = open_store(file);
        CHECK_EQ(agent.get_state(), R"({"a":1,"nested":{"b":[1,2],"c":"x"}})");
        agent.replace_state(R"({"replaced":true})");
    }  // the destructor closes
    {
        Agent agent = open_store_json(file, R"({"synchronous":"normal"})");
        CHECK_EQ(agent.get_state(), R"({"replaced":true})");
    }
    // The store file is private to its owner (SQLite: on PostgreSQL there is no file).
    if (!g_pg) {
        CHECK((fs::status(file).permissions() & (fs::perms::group_all | fs::perms::others_all)) ==
              fs::perms::none);
    }
}

TEST(two_agents_on_one_file_see_each_other) {
    const auto file = path_in_dir("shared.db");
    Agent a = open_store(file);
    Agent b = open_store(file);
    a.set_state(R"({"from_a":1})");
    CHECK_EQ(b.get_state(), R"({"from_a":1})");
    CHECK_EQ(b.set_state(R"({"from_b":2})"), R"({"from_a":1,"from_b":2})");
    CHECK_EQ(a.get_state(), R"({"from_a":1,"from_b":2})");
}

TEST(options_to_json_is_exact_and_escaped) {
    CHECK_EQ(Options().to_json(), "{}");
    Options options;
    options.initial_state = R"({"s":"a \"quoted\" } ] string"})";
    options.max_value_bytes = 4096;
    options.synchronous = agent_state::Synchronous::normal;
    options.busy_timeout_ms = 250;
    options.read_only = true;
    CHECK_EQ(options.to_json(),
             R"({"initial_state":{"s":"a \"quoted\" } ] string"},"max_value_bytes":4096,)"
             R"("synchronous":"normal","busy_timeout_ms":250,"read_only":true})");
    Options full;
    full.synchronous = agent_state::Synchronous::full;
    CHECK_EQ(full.to_json(), R"({"synchronous":"full"})");
}

TEST(options_are_applied) {
    const auto file = path_in_dir("options.db");
    Options options;
    options.initial_state = "{\"greeting\":" + agent_state::json_quote("hi \"you\"\n") + "}";
    options.max_value_bytes = 100;
    options.synchronous = agent_state::Synchronous::normal;
    options.busy_timeout_ms = 10;
    Agent agent = open_store(file, options);
    CHECK_EQ(agent.get_state(), R"({"greeting":"hi \"you\"\n"})");
    CHECK_ERROR(agent.set_state("{\"big\":\"" + std::string(100, 'x') + "\"}"), Status::too_large);
    agent.set_state(R"({"small":1})");
    agent.close();

    Options read_only;
    read_only.read_only = true;
    Agent reader = open_store(file, read_only);
    CHECK_EQ(reader.get_state(), R"({"greeting":"hi \"you\"\n","small":1})");
    CHECK_ERROR(reader.set_state(R"({"x":1})"), Status::storage);
    CHECK_ERROR(reader.replace_state(R"({"x":1})"), Status::storage);
    CHECK_EQ(reader.get_state(), R"({"greeting":"hi \"you\"\n","small":1})");
}

TEST(options_initial_state_cannot_inject_other_options) {
    const auto file = path_in_dir("inject.db");
    const std::string attacks[] = {
        R"({}, "read_only": true)",
        R"({"a":1},"max_value_bytes":2)",
        R"({"a":"x"},"read_only":true,"b":{"c":"}"})",
        R"({"a":1}})",
        R"({"a":[1}])",
        R"({"a":1)",
        R"("unterminated)",
        R"(1, "read_only": true)",
        std::string("{\"a\":1}\0,\"read_only\":true", 25),
        "",
        "   ",
    };
    for (const std::string &attack : attacks) {
        Options options;
        options.initial_state = attack;
        const Error e = CATCH_ERROR(open_store(file, options));
        CHECK_EQ(status_text(e.status()), status_text(Status::json));
    }
    // Strings that merely look like structure are fine.
    Options options;
    options.initial_state = R"( {"a":"}","b":"\\","c":"\"]","d":[{}]} )";
    Agent agent = open_store(file, options);
    CHECK_EQ(agent.get_state(), R"({"a":"}","b":"\\","c":"\"]","d":[{}]})");
    // Text that would inject members if pasted naively is just a string value here.
    options.initial_state = R"({"a":"\"},\"read_only\":true,\"x\":{\""})";
    Agent quoted = open_store(path_in_dir("quoted.db"), options);
    CHECK_EQ(quoted.get_state(), R"({"a":"\"},\"read_only\":true,\"x\":{\""})");
    quoted.set_state(R"({"writable":true})");  // not read-only
}

TEST(options_initial_state_guard_agrees_with_json_test_suite) {
    // Every valid document passes the wrapper's structural check (the library then judges it);
    // no invalid one ever opens.
    const char *dir = std::getenv("AGENT_STATE_JSON_CORPUS");
    if (dir == nullptr || !fs::is_directory(dir)) {
        std::cout << "    (skipped: AGENT_STATE_JSON_CORPUS not set)\n";
        return;
    }
    const auto file = path_in_dir("corpus.db");
    int seen = 0;
    for (const auto &entry : fs::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        if (name.size() < 2 || (name[0] != 'y' && name[0] != 'n') || name[1] != '_') continue;
        ++seen;
        Options options;
        options.initial_state = read_file(entry.path());
        try {
            Agent agent = open_store(file, options);
            // Opened: must be a valid document that is a plain object.
            if (name[0] == 'n') fail(__FILE__, __LINE__, "invalid JSON opened: " + name);
            CHECK_EQ(agent.get_state().front(), '{');
        } catch (const Error &e) {
            if (name[0] == 'n' && e.status() != Status::json) {
                fail(__FILE__, __LINE__, name + ": expected AGENT_ERR_JSON, got " + e.what());
            }
            if (name[0] == 'y' && (e.status() == Status::json)) {
                fail(__FILE__, __LINE__, name + ": valid JSON refused as malformed: " + e.what());
            }
        }
    }
    CHECK(seen > 200);
}

TEST(raw_options_json_open) {
    const auto file = path_in_dir("raw.db");
    Agent agent = open_store_json(file, R"({"initial_state":{"k":"v"},"busy_timeout_ms":0})");
    CHECK_EQ(agent.get_state(), R"({"k":"v"})");
    CHECK_ERROR(open_store_json(file, R"({"bogus":1})"), Status::invalid_argument);
    CHECK_ERROR(open_store_json(file, R"({"max_value_bytes":1})"), Status::invalid_argument);
    CHECK_ERROR(open_store_json(file, R"({"synchronous":"fast"})"), Status::invalid_argument);
    CHECK_ERROR(open_store_json(file, R"({"read_only":"yes"})"), Status::invalid_argument);
    CHECK_ERROR(open_store_json(file, R"({"initial_state":[1]})"), Status::invalid_argument);
    CHECK_ERROR(open_store_json(file, R"([])"), Status::invalid_argument);
    CHECK_ERROR(open_store_json(file, R"({)"), Status::json);
    CHECK_ERROR(open_store_json(file, ""), Status::json);
    CHECK_ERROR(open_store_json(file, std::string_view("{}\0x", 4)), Status::json);
    CHECK_ERROR(open_store_json(file, R"({"initial_state":{"a":1,"a":2}})"), Status::codec);
    CHECK_ERROR(open_store_json(file, R"({"initial_state":{"a":"0123456789"},"max_value_bytes":10})"),
                Status::too_large);
}

TEST(buffer_shares_the_snapshot) {
    Agent agent = open_store(":memory:");
    agent.set_state(R"({"a":"b"})");
    agent_state::Buffer buffer = agent.get_state_buffer();
    CHECK(!buffer.empty());
    CHECK_EQ(buffer.view(), std::string_view(R"({"a":"b"})"));
    CHECK_EQ(std::strlen(buffer.c_str()), buffer.size());
    // The bytes never change under the holder, even when the state changes or the agent closes.
    agent.set_state(R"({"a":"c"})");
    agent.close();
    CHECK_EQ(buffer.str(), R"({"a":"b"})");
    agent_state::Buffer moved = std::move(buffer);
    CHECK(buffer.empty());  // NOLINT(bugprone-use-after-move): moved-from is specified empty
    CHECK_EQ(buffer.view(), std::string_view());
    CHECK_EQ(std::string(buffer.c_str()), "");
    CHECK_EQ(std::string_view(moved), std::string_view(R"({"a":"b"})"));
    moved.reset();
    CHECK(moved.empty());
    moved.reset();  // harmless twice

    Agent other = open_store(":memory:");
    CHECK_EQ(other.set_state_buffer(R"({"x":1})").view(), std::string_view(R"({"x":1})"));
    CHECK_EQ(other.replace_state_buffer(R"({"y":2})").str(), R"({"y":2})");
    CHECK_ERROR(other.set_state_buffer("[]"), Status::invalid_argument);
    CHECK_ERROR(other.replace_state_buffer("{"), Status::json);
}

// ---------------------------------------------------------------------------------------------
// Error paths.

TEST(error_carries_status_name_and_message) {
    Agent agent = open_store(":memory:");
    const Error e = CATCH_ERROR(agent.set_state(R"({"a":)"));
    CHECK(e.status() == Status::json);
    CHECK_EQ(e.code(), 3);
    CHECK_EQ(std::string(e.name()), "AGENT_ERR_JSON");
    CHECK(contains(e.what(), "agent_set_state"));
    // Caught as a std::runtime_error too.
    try {
        agent.set_state("[]");
        fail(__FILE__, __LINE__, "no exception");
    } catch (const std::runtime_error &re) {
        CHECK(contains(re.what(), "agent_set_state"));
    }
}

TEST(malformed_json_is_status_3) {
    Agent agent = open_store(":memory:");
    agent.set_state(R"({"keep":1})");
    const std::string bad[] = {
        R"({"a":)", "", "   ", R"({"a":1} x)", R"({'a':1})", R"({"a":1,})",
        "{\"a\":\"\xff\"}", R"({"a":"\ud800"})", std::string(200, '[') + std::string(200, ']'),
        std::string("{\"a\":\0}", 7),
    };
    for (const auto &text : bad) {
        CHECK_ERROR(agent.set_state(text), Status::json);
        CHECK_ERROR(agent.replace_state(text), Status::json);
    }
    CHECK_ERROR(agent.set_state(std::string_view()), Status::json);
    CHECK_EQ(agent.get_state(), R"({"keep":1})");
}

TEST(non_object_is_status_1) {
    Agent agent = open_store(":memory:");
    agent.set_state(R"({"keep":1})");
    const char *bad[] = {"[1]", "\"s\"", "null", "42", "true",
                         R"({"$date":"2020-01-01T00:00:00.000Z"})"};
    for (const char *text : bad) {
        CHECK_ERROR(agent.set_state(text), Status::invalid_argument);
        CHECK_ERROR(agent.replace_state(text), Status::invalid_argument);
    }
    CHECK_EQ(agent.get_state(), R"({"keep":1})");
}

TEST(codec_errors_are_status_4) {
    Agent agent = open_store(":memory:");
    agent.set_state(R"({"keep":1})");
    std::string deep;
    for (int i = 0; i < 70; ++i) deep += "{\"a\":";
    deep += "1";
    for (int i = 0; i < 70; ++i) deep += "}";
    const std::string bad[] = {
        R"({"a":1,"a":2})",
        R"({"a":1,"\u0061":2})",
        R"({"n":1e400})",
        R"({"d":{"$date":"yesterday"}})",
        R"({"b":{"$bigint":"012"}})",
        R"({"s":{"$set":[1,1]}})",
        deep,
    };
    for (const auto &text : bad) {
        CHECK_ERROR(agent.set_state(text), Status::codec);
        CHECK_ERROR(agent.replace_state(text), Status::codec);
    }
    // Tagged values are fine when well-formed.
    CHECK_EQ(agent.set_state(R"({"d":{"$date":"2026-11-30T03:06:44.123Z"}})"),
             R"({"keep":1,"d":{"$date":"2026-11-30T03:06:44.123Z"}})");
}

TEST(too_large_is_status_5_and_writes_nothing) {
    Options options;
    options.max_value_bytes = 64;
    Agent agent = open_store(":memory:", options);
    CHECK_ERROR(agent.set_state("{\"a\":\"" + std::string(80, 'x') + "\"}"), Status::too_large);
    CHECK_ERROR(agent.replace_state("{\"a\":\"" + std::string(80, 'x') + "\"}"), Status::too_large);
    // Each patch fits, but the merged state would not.
    agent.set_state("{\"a\":\"" + std::string(30, 'x') + "\"}");
    const std::string before = agent.get_state();
    CHECK_ERROR(agent.set_state("{\"b\":\"" + std::string(30, 'y') + "\"}"), Status::too_large);
    CHECK_EQ(agent.get_state(), before);
}

TEST(use_after_close_is_status_2) {
    Agent agent = open_store(":memory:");
    agent.set_state(R"({"a":1})");
    const agent_state::HookId id =
        agent.on_state_changed([](std::string_view, std::string_view, std::optional<std::string_view>) {});
    agent.close();
    CHECK(!agent.is_open());
    CHECK(!agent);
    CHECK_EQ(agent.handle(), 0u);
    const Error e = CATCH_ERROR(agent.get_state());
    CHECK(e.status() == Status::bad_handle);
    CHECK(contains(e.what(), "closed"));
    CHECK_ERROR(agent.set_state("{}"), Status::bad_handle);
    CHECK_ERROR(agent.replace_state("{}"), Status::bad_handle);
    CHECK_ERROR(agent.get_state_buffer(), Status::bad_handle);
    CHECK_ERROR(agent.remove_hook(id), Status::bad_handle);
    CHECK_ERROR(agent.on_state_changed([](std::string_view, std::string_view,
                                          std::optional<std::string_view>) {}),
                Status::bad_handle);
    CHECK_ERROR(agent.set_initial_state_hook([] { return std::string("{}"); }), Status::bad_handle);
    agent.close();  // idempotent
    agent.close();
    Agent never_opened;
    CHECK(!never_opened.is_open());
    CHECK_ERROR(never_opened.get_state(), Status::bad_handle);
    never_opened.close();
}

TEST(handle_closed_behind_the_wrappers_back_is_status_2) {
    Agent agent = open_store(":memory:");
    const AgentHandle h = agent.handle();
    CHECK_EQ(agent_close(h), AGENT_OK);
    // The library itself reports the stale handle.
    const Error e = CATCH_ERROR(agent.set_state("{}"));
    CHECK(e.status() == Status::bad_handle);
    CHECK(contains(e.what(), "agent_set_state"));
    CHECK(agent.is_open());  // the wrapper cannot know yet
    agent.close();           // the library's BAD_HANDLE is taken as "already closed"
    CHECK(!agent.is_open());
}

SQLITE_ONLY_TEST(foreign_file_is_status_6_and_left_untouched, "a foreign file where the store should be") {
    const auto file = path_in_dir("foreign.txt");
    std::string junk;
    for (int i = 0; i < 512; ++i) junk += "this is not an SQLite database. ";
    {
        std::ofstream out(file, std::ios::binary);
        out << junk;
    }
    const Error e = CATCH_ERROR(open_store(file));
    CHECK(e.status() == Status::storage);
    CHECK(contains(e.what(), "agent_open"));
    CHECK(read_file(file) == junk);
    CHECK(!fs::exists(path_in_dir("foreign.txt-wal")));
}

SQLITE_ONLY_TEST(bad_paths, "empty paths, NUL bytes, missing directories and files") {
    CHECK_ERROR(Agent(""), Status::invalid_argument);
    CHECK_ERROR(Agent(std::string_view("a\0b", 3)), Status::invalid_argument);
    CHECK_ERROR(Agent((g_dir / "no" / "such" / "dir.db").string()), Status::storage);
    Options read_only;
    read_only.read_only = true;
    CHECK_ERROR(open_store(path_in_dir("absent.db"), read_only), Status::storage);
    CHECK(!fs::exists(path_in_dir("absent.db")));
}

TEST(unknown_hook_id_is_status_1) {
    Agent agent = open_store(":memory:");
    CHECK_ERROR(agent.remove_hook(12345), Status::invalid_argument);
    const auto id =
        agent.on_state_changed([](std::string_view, std::string_view, std::optional<std::string_view>) {});
    agent.remove_hook(id);
    CHECK_ERROR(agent.remove_hook(id), Status::invalid_argument);
    CHECK_ERROR(agent.on_state_changed(agent_state::StateChangedFn()), Status::invalid_argument);
}

SQLITE_ONLY_TEST(writes_while_another_connection_holds_the_lock_are_busy,
                 "SQLite's write lock: on PostgreSQL a write is optimistic, "
                 "so an initial-state hook holds no lock") {
    // The initial-state hook runs inside the first write's transaction, holding the store's
    // write lock: a second connection with busy_timeout_ms 0 cannot write meanwhile.
    const auto file = path_in_dir("busy.db");
    Agent holder = open_store(file);
    Options impatient;
    impatient.busy_timeout_ms = 0;
    Agent other = open_store(file, impatient);
    Status seen = Status::ok;
    holder.set_initial_state_hook([&] {
        try {
            other.set_state(R"({"other":1})");
        } catch (const Error &e) {
            seen = e.status();
        }
        return std::string("{}");
    });
    CHECK_EQ(holder.set_state(R"({"holder":1})"), R"({"holder":1})");
    CHECK_EQ(status_text(seen), status_text(Status::busy));
    CHECK_EQ(other.get_state(), R"({"holder":1})");
}

TEST(raw_c_hook_failure_is_status_8_after_commit) {
    Agent agent = open_store(":memory:");
    std::uint64_t id = 0;
    auto failing = [](void *, const AgentStateChange *) -> std::int32_t { return 7; };
    CHECK_EQ(agent_on_state_changed(agent.handle(), failing, nullptr, nullptr, &id), AGENT_OK);
    const Error e = CATCH_ERROR(agent.set_state(R"({"a":1})"));
    CHECK(e.status() == Status::hook);
    CHECK(contains(e.what(), "returned 7"));
    CHECK_EQ(agent.get_state(), R"({"a":1})");
    agent.remove_hook(id);
    CHECK_EQ(agent.set_state(R"({"b":2})"), R"({"a":1,"b":2})");
}

// ---------------------------------------------------------------------------------------------
// on_state_changed hooks.

namespace {
struct Delivery {
    std::string next, prev;
    std::optional<std::string> patch;
};

agent_state::StateChangedFn recorder(std::vector<Delivery> &log) {
    return [&log](std::string_view next, std::string_view prev, std::optional<std::string_view> patch) {
        Delivery d{std::string(next), std::string(prev), std::nullopt};
        if (patch) d.patch = std::string(*patch);
        log.push_back(std::move(d));
    };
}
}  // namespace

TEST(hooks_see_next_prev_and_patch) {
    Options options;
    options.initial_state = R"({"status":"idle"})";
    Agent agent = open_store(":memory:", options);
    std::vector<Delivery> log;
    agent.on_state_changed(recorder(log));
    agent.set_state(R"({"status":"processing","x":null})");
    agent.replace_state(R"({"fresh":1})");
    agent.set_state(R"({"fresh":2})");
    CHECK_EQ(log.size(), 3u);
    if (log.size() == 3) {
        CHECK_EQ(log[0].prev, R"({"status":"idle"})");  // the initial state
        CHECK_EQ(log[0].next, R"({"status":"processing"})");
        CHECK(log[0].patch.has_value());
        CHECK_EQ(log[0].patch.value_or("-"), R"({"status":"processing","x":null})");
        CHECK_EQ(log[1].prev, log[0].next);
        CHECK_EQ(log[1].next, R"({"fresh":1})");
        CHECK(!log[1].patch.has_value());  // replace: no patch
        CHECK_EQ(log[2].prev, log[1].next);
        CHECK_EQ(log[2].next, R"({"fresh":2})");
    }
    // Failed writes deliver nothing.
    CHECK_ERROR(agent.set_state("[]"), Status::invalid_argument);
    CHECK_EQ(log.size(), 3u);
}

TEST(hooks_run_in_registration_order) {
    Agent agent = open_store(":memory:");
    std::string order;
    agent.on_state_changed([&](auto, auto, auto) { order += "A"; });
    agent.on_state_changed([&](auto, auto, auto) { order += "B"; });
    const auto c = agent.on_state_changed([&](auto, auto, auto) { order += "C"; });
    agent.set_state(R"({"a":1})");
    CHECK_EQ(order, "ABC");
    agent.remove_hook(c);
    agent.on_state_changed([&](auto, auto, auto) { order += "D"; });
    agent.replace_state(R"({"a":2})");
    CHECK_EQ(order, "ABCABD");
}

TEST(hook_exception_is_rethrown_after_commit) {
    Agent agent = open_store(":memory:");
    int after = 0;
    agent.on_state_changed([](std::string_view next, auto, auto) {
        if (contains(next, "boom")) throw std::logic_error("hook says boom");
    });
    agent.on_state_changed([&](auto, auto, auto) { ++after; });
    try {
        agent.set_state(R"({"boom":true})");
        fail(__FILE__, __LINE__, "nothing thrown");
    } catch (const Error &e) {
        fail(__FILE__, __LINE__, std::string("got agent_state::Error instead: ") + e.what());
    } catch (const std::logic_error &e) {
        CHECK_EQ(std::string(e.what()), "hook says boom");
    }
    CHECK_EQ(after, 1);  // the later hook still ran
    CHECK_EQ(agent.get_state(), R"({"boom":true})");  // committed
    // The next call is not haunted by the old exception.
    CHECK_EQ(agent.set_state(R"({"boom":null})"), "{}");
    CHECK_EQ(after, 2);
    // replace_state rethrows too.
    try {
        agent.replace_state(R"({"boom":1})");
        fail(__FILE__, __LINE__, "nothing thrown");
    } catch (const std::logic_error &) {
    }
    CHECK_EQ(agent.get_state(), R"({"boom":1})");
}

TEST(first_hook_exception_wins_and_any_type_is_rethrown) {
    Agent agent = open_store(":memory:");
    agent.on_state_changed([](auto, auto, auto) { throw 42; });
    agent.on_state_changed([](auto, auto, auto) { throw std::runtime_error("second"); });
    try {
        agent.set_state(R"({"a":1})");
        fail(__FILE__, __LINE__, "nothing thrown");
    } catch (int v) {
        CHECK_EQ(v, 42);
    } catch (...) {
        fail(__FILE__, __LINE__, "wrong exception");
    }
    CHECK_EQ(agent.get_state(), R"({"a":1})");
}

TEST(hook_registered_in_another_translation_unit) {
    Agent agent = open_store(":memory:");
    second_tu::register_throwing_hook(agent);
    CHECK_EQ(second_tu::write_from_second_tu(agent, R"({"ok":1})"), R"({"ok":1})");
    try {
        agent.set_state(R"({"fail":1})");
        fail(__FILE__, __LINE__, "nothing thrown");
    } catch (const second_tu::Failure &e) {
        CHECK(contains(e.what(), "second_tu"));
    }
    try {
        second_tu::write_from_second_tu(agent, R"({"fail":2})");
        fail(__FILE__, __LINE__, "nothing thrown");
    } catch (const second_tu::Failure &) {
    }
    CHECK_EQ(agent.get_state(), R"({"ok":1,"fail":2})");
}

TEST(validator_set_in_another_translation_unit) {
    Agent agent = open_store(":memory:");
    second_tu::set_throwing_validator(agent);
    CHECK_EQ(second_tu::write_from_second_tu(agent, R"({"ok":1})"), R"({"ok":1})");
    try {
        agent.set_state(R"({"forbidden":1})");
        fail(__FILE__, __LINE__, "nothing thrown");
    } catch (const Error &e) {
        CHECK_EQ(status_text(e.status()), status_text(Status::rejected));
        CHECK(contains(e.what(), "rejected in second_tu at version 2"));
        try {
            std::rethrow_if_nested(e);
            fail(__FILE__, __LINE__, "no nested exception");
        } catch (const second_tu::Failure &inner) {
            CHECK(contains(inner.what(), "second_tu"));
        }
    }
    CHECK_ERROR(second_tu::write_from_second_tu(agent, R"({"forbidden":2})"), Status::rejected);
    CHECK_EQ(agent.get_state(), R"({"ok":1})");
}

TEST(removed_hooks_are_not_called_and_are_destroyed) {
    Agent agent = open_store(":memory:");
    auto token = std::make_shared<int>(0);
    int calls = 0;
    const auto id = agent.on_state_changed([&calls, token](auto, auto, auto) { ++calls; });
    CHECK_EQ(token.use_count(), 2);
    agent.set_state(R"({"a":1})");
    agent.remove_hook(id);
    CHECK_EQ(token.use_count(), 1);  // the std::function was destroyed exactly once
    agent.set_state(R"({"a":2})");
    CHECK_EQ(calls, 1);

    // Closing and destroying the Agent destroy the remaining hooks.
    agent.on_state_changed([token](auto, auto, auto) {});
    agent.set_initial_state_hook([token] { return std::string("{}"); });
    CHECK_EQ(token.use_count(), 3);
    agent.close();
    CHECK_EQ(token.use_count(), 1);
    {
        Agent scoped = open_store(":memory:");
        scoped.on_state_changed([token](auto, auto, auto) {});
        CHECK_EQ(token.use_count(), 2);
    }
    CHECK_EQ(token.use_count(), 1);
}

TEST(subscription_removes_its_hook) {
    Agent agent = open_store(":memory:");
    int calls = 0;
    auto token = std::make_shared<int>(0);
    {
        agent_state::Subscription sub = agent.subscribe([&calls, token](auto, auto, auto) { ++calls; });
        CHECK(static_cast<bool>(sub));
        CHECK(sub.id() != 0);
        agent.set_state(R"({"a":1})");
        agent_state::Subscription moved = std::move(sub);
        CHECK(!sub);  // NOLINT(bugprone-use-after-move): moved-from is specified empty
        agent.set_state(R"({"a":2})");
    }
    agent.set_state(R"({"a":3})");
    CHECK_EQ(calls, 2);
    CHECK_EQ(token.use_count(), 1);

    // release() keeps the hook registered; reset() after close() is harmless.
    agent_state::Subscription kept = agent.subscribe([&calls](auto, auto, auto) { ++calls; });
    const auto id = kept.release();
    CHECK(!kept);
    agent.set_state(R"({"a":4})");
    CHECK_EQ(calls, 3);
    agent.remove_hook(id);
    agent_state::Subscription late = agent.subscribe([](auto, auto, auto) {});
    agent.close();
    late.reset();
    CHECK(!late);
}

TEST(subscription_follows_a_moved_agent) {
    Agent agent = open_store(":memory:");
    int calls = 0;
    agent_state::Subscription sub = agent.subscribe([&calls](auto, auto, auto) { ++calls; });
    Agent moved = std::move(agent);
    moved.set_state(R"({"a":1})");
    sub.reset();
    moved.set_state(R"({"a":2})");
    CHECK_EQ(calls, 1);
}

TEST(hook_may_remove_itself) {
    Agent agent = open_store(":memory:");
    int calls = 0;
    agent_state::HookId self = 0;
    self = agent.on_state_changed([&](auto, auto, auto) {
        ++calls;
        agent.remove_hook(self);
    });
    agent.set_state(R"({"a":1})");
    agent.set_state(R"({"a":2})");
    CHECK_EQ(calls, 1);
}

TEST(nested_set_state_from_a_hook) {
    Agent agent = open_store(":memory:");
    std::vector<Delivery> log;
    std::vector<std::string> nested_results;
    agent.on_state_changed(recorder(log));
    agent.on_state_changed([&](std::string_view next, auto, auto) {
        // Drive a small state machine: step 1 -> 2 -> 3.
        if (contains(next, "\"step\":1")) nested_results.push_back(agent.set_state(R"({"step":2})"));
        else if (contains(next, "\"step\":2")) nested_results.push_back(agent.set_state(R"({"step":3})"));
        // Reading inside a hook sees the committed state.
        (void)agent.get_state();
    });
    CHECK_EQ(agent.set_state(R"({"step":1,"tag":"x"})"), R"({"step":1,"tag":"x"})");
    CHECK_EQ(agent.get_state(), R"({"step":3,"tag":"x"})");
    CHECK_EQ(nested_results.size(), 2u);
    if (nested_results.size() == 2) {
        CHECK_EQ(nested_results[0], R"({"step":2,"tag":"x"})");
        CHECK_EQ(nested_results[1], R"({"step":3,"tag":"x"})");
    }
    // Deliveries stay in commit order, each prev the previous next.
    CHECK_EQ(log.size(), 3u);
    for (std::size_t i = 1; i < log.size(); ++i) CHECK_EQ(log[i].prev, log[i - 1].next);
    if (log.size() == 3) CHECK_EQ(log[2].next, R"({"step":3,"tag":"x"})");
}

TEST(exception_from_a_nested_delivery_reaches_the_outermost_call) {
    Agent agent = open_store(":memory:");
    agent.on_state_changed([&](std::string_view next, auto, auto) {
        if (contains(next, "\"first\"") && !contains(next, "\"second\"")) {
            // Its own delivery happens after this hook returns; it throws there.
            CHECK_EQ(agent.set_state(R"({"second":1})"), R"({"first":1,"second":1})");
        } else if (contains(next, "\"second\"")) {
            throw std::domain_error("from the nested delivery");
        }
    });
    try {
        agent.set_state(R"({"first":1})");
        fail(__FILE__, __LINE__, "nothing thrown");
    } catch (const std::domain_error &e) {
        CHECK_EQ(std::string(e.what()), "from the nested delivery");
    }
    CHECK_EQ(agent.get_state(), R"({"first":1,"second":1})");
}

TEST(nested_call_in_a_later_hook_does_not_swallow_an_earlier_exception) {
    Agent agent = open_store(":memory:");
    agent.on_state_changed([](std::string_view next, auto, auto) {
        if (contains(next, "\"throw\"") && !contains(next, "\"nested\"")) {
            throw std::out_of_range("first hook");
        }
    });
    agent.on_state_changed([&](std::string_view next, auto, auto) {
        // Successful nested calls made after the first hook threw, in the same delivery.
        if (contains(next, "\"throw\"") && !contains(next, "\"nested\"")) {
            (void)agent.get_state();
            agent.set_state(R"({"nested":1})");
            agent.remove_hook(agent.on_state_changed([](auto, auto, auto) {}));
        }
    });
    try {
        agent.set_state(R"({"throw":1})");
        fail(__FILE__, __LINE__, "nothing thrown");
    } catch (const std::out_of_range &e) {
        CHECK_EQ(std::string(e.what()), "first hook");
    } catch (const std::exception &e) {
        fail(__FILE__, __LINE__, std::string("wrong exception: ") + e.what());
    }
    CHECK_EQ(agent.get_state(), R"({"throw":1,"nested":1})");
}

TEST(failing_call_inside_a_hook_propagates_through_it) {
    Agent agent = open_store(":memory:");
    agent.on_state_changed([&](std::string_view next, auto, auto) {
        if (contains(next, "\"go\"")) agent.set_state("not json");  // throws Error(json)
    });
    CHECK_ERROR(agent.set_state(R"({"go":1})"), Status::json);
    CHECK_EQ(agent.get_state(), R"({"go":1})");
}

TEST(hook_may_close_its_own_agent) {
    Agent agent = open_store(":memory:");
    auto token = std::make_shared<int>(0);
    agent.on_state_changed([&agent, token](std::string_view next, auto, auto) {
        if (contains(next, "\"close\"")) agent.close();
    });
    CHECK_EQ(agent.set_state(R"({"x":1})"), R"({"x":1})");
    CHECK_EQ(agent.set_state(R"({"close":1})"), R"({"x":1,"close":1})");
    CHECK(!agent.is_open());
    CHECK_EQ(token.use_count(), 1);
    CHECK_ERROR(agent.get_state(), Status::bad_handle);
}

TEST(hook_exception_in_one_agent_while_writing_another) {
    Agent a = open_store(":memory:");
    Agent b = open_store(":memory:");
    b.on_state_changed([](auto, auto, auto) { throw std::runtime_error("from b's hook"); });
    a.on_state_changed([&](auto, auto, auto) { b.set_state(R"({"via_a":1})"); });
    // b's change is delivered by the outermost call (a.set_state), which rethrows.
    try {
        a.set_state(R"({"a":1})");
        fail(__FILE__, __LINE__, "nothing thrown");
    } catch (const std::runtime_error &e) {
        CHECK_EQ(std::string(e.what()), "from b's hook");
    }
    CHECK_EQ(a.get_state(), R"({"a":1})");
    CHECK_EQ(b.get_state(), R"({"via_a":1})");
}

// ---------------------------------------------------------------------------------------------
// Initial-state hook.

TEST(initial_state_hook_supplies_the_default) {
    const auto file = path_in_dir("initial_hook.db");
    Options options;
    options.initial_state = R"({"from":"option"})";
    Agent agent = open_store(file, options);
    int calls = 0;
    agent.set_initial_state_hook([&] {
        ++calls;
        return std::string(R"({"from":"hook","n":)") + std::to_string(calls) + "}";
    });
    CHECK_EQ(agent.get_state(), R"({"from":"hook","n":1})");
    CHECK_EQ(agent.get_state(), R"({"from":"hook","n":2})");  // asked every time, never stored
    CHECK_EQ(agent.set_state(R"({"x":true})"), R"({"from":"hook","n":3,"x":true})");
    CHECK_EQ(agent.get_state(), R"({"from":"hook","n":3,"x":true})");
    CHECK_EQ(calls, 3);  // stored now: no longer asked
    agent.replace_state("{}");
    CHECK_EQ(calls, 3);

    Agent fresh = open_store(":memory:", options);
    fresh.set_initial_state_hook([] { return std::string(R"({"from":"hook"})"); });
    CHECK_EQ(fresh.get_state(), R"({"from":"hook"})");
    fresh.clear_initial_state_hook();
    CHECK_EQ(fresh.get_state(), R"({"from":"option"})");
    fresh.set_initial_state_hook([] { return std::string(R"({"v":1})"); });
    fresh.set_initial_state_hook(nullptr);  // an empty function removes it too
    CHECK_EQ(fresh.get_state(), R"({"from":"option"})");
}

TEST(initial_state_hook_exception_is_rethrown_and_nothing_is_stored) {
    Agent agent = open_store(":memory:");
    std::vector<Delivery> log;
    agent.on_state_changed(recorder(log));
    agent.set_initial_state_hook([]() -> std::string { throw std::invalid_argument("no default"); });
    try {
        agent.get_state();
        fail(__FILE__, __LINE__, "nothing thrown");
    } catch (const std::invalid_argument &e) {
        CHECK_EQ(std::string(e.what()), "no default");
    }
    try {
        agent.set_state(R"({"a":1})");
        fail(__FILE__, __LINE__, "nothing thrown");
    } catch (const std::invalid_argument &) {
    }
    CHECK(log.empty());
    agent.clear_initial_state_hook();
    CHECK_EQ(agent.get_state(), "{}");  // nothing was stored
}

TEST(initial_state_hook_answer_is_checked) {
    Options options;
    options.max_value_bytes = 32;
    Agent agent = open_store(":memory:", options);
    agent.set_initial_state_hook([] { return std::string("{not json"); });
    CHECK_ERROR(agent.get_state(), Status::json);
    agent.set_initial_state_hook([] { return std::string("[1,2]"); });
    CHECK_ERROR(agent.get_state(), Status::invalid_argument);
    agent.set_initial_state_hook([] { return std::string(R"({"a":1,"a":1})"); });
    CHECK_ERROR(agent.set_state("{}"), Status::codec);
    agent.set_initial_state_hook([] { return "{\"a\":\"" + std::string(64, 'x') + "\"}"; });
    const Error e = CATCH_ERROR(agent.get_state());
    CHECK(e.status() == Status::too_large);
    CHECK(contains(e.what(), "initial-state hook"));
    agent.clear_initial_state_hook();
    CHECK_EQ(agent.get_state(), "{}");
}

TEST(initial_state_hook_cannot_call_its_own_agent) {
    Agent agent = open_store(":memory:");
    Agent other = open_store(":memory:");
    other.set_state(R"({"other":1})");
    std::vector<Status> seen;
    agent.set_initial_state_hook([&] {
        try {
            agent.get_state();
        } catch (const Error &e) {
            seen.push_back(e.status());
        }
        try {
            agent.close();
        } catch (const Error &e) {
            seen.push_back(e.status());
        }
        return other.get_state();  // another agent is fine
    });
    CHECK_EQ(agent.get_state(), R"({"other":1})");
    CHECK_EQ(seen.size(), 2u);
    for (Status s : seen) CHECK_EQ(status_text(s), status_text(Status::busy));
    CHECK(agent.is_open());  // the refused close left it open
    // Letting the Error escape from the hook rethrows it from the outer call.
    agent.set_initial_state_hook([&] { return agent.get_state(); });
    CHECK_ERROR(agent.get_state(), Status::busy);
}

// ---------------------------------------------------------------------------------------------
// Versions, compare-and-set, the validator and the change log.

namespace {
struct VersionedDelivery {
    std::uint64_t version;
    std::string prev, next;
    std::optional<std::string> patch;
};

std::ostream &operator<<(std::ostream &os, const VersionedDelivery &d) {
    return os << "{v" << d.version << " prev " << d.prev << " next " << d.next << " patch "
              << (d.patch ? *d.patch : std::string("nullopt")) << "}";
}

bool operator==(const VersionedDelivery &a, const VersionedDelivery &b) {
    return a.version == b.version && a.prev == b.prev && a.next == b.next && a.patch == b.patch;
}

agent_state::ChangeFn change_recorder(std::vector<VersionedDelivery> &log) {
    return [&log](const agent_state::Change &c) {
        VersionedDelivery d{c.version, std::string(c.prev), std::string(c.next), std::nullopt};
        if (c.patch) d.patch = std::string(*c.patch);
        log.push_back(std::move(d));
    };
}

Options with_log(agent_state::ChangeLog log) {
    Options options;
    options.change_log = log;
    options.synchronous = agent_state::Synchronous::normal;
    return options;
}

// Counts `needle` in `haystack`.
std::size_t count_of(std::string_view haystack, std::string_view needle) {
    std::size_t n = 0;
    for (std::size_t pos = haystack.find(needle); pos != std::string_view::npos;
         pos = haystack.find(needle, pos + 1)) {
        ++n;
    }
    return n;
}

// The changes_since() text with every "at" value replaced by 0 (the times are checked apart).
std::string without_times(const std::string &json) {
    std::string out;
    std::size_t pos = 0;
    for (;;) {
        const std::size_t at = json.find("\"at\":", pos);
        if (at == std::string::npos) break;
        std::size_t end = at + 5;
        while (end < json.size() && json[end] >= '0' && json[end] <= '9') ++end;
        out += json.substr(pos, at + 5 - pos) + "0";
        pos = end;
    }
    return out + json.substr(pos);
}
}  // namespace

TEST(status_values_of_the_new_codes) {
    CHECK_EQ(static_cast<int>(Status::conflict), 9);
    CHECK_EQ(static_cast<int>(Status::rejected), 10);
    CHECK_EQ(static_cast<int>(Status::gap), 11);
    CHECK_EQ(std::string(agent_state::status_name(Status::conflict)), "AGENT_ERR_CONFLICT");
    CHECK_EQ(std::string(agent_state::status_name(Status::rejected)), "AGENT_ERR_REJECTED");
    CHECK_EQ(std::string(agent_state::status_name(Status::gap)), "AGENT_ERR_GAP");
    CHECK_EQ(std::string(Error(Status::gap, "x").name()), "AGENT_ERR_GAP");
}

TEST(status_unavailable_is_12) {
    CHECK_EQ(static_cast<int>(Status::unavailable), 12);
    CHECK_EQ(std::string(agent_state::status_name(Status::unavailable)), "AGENT_ERR_UNAVAILABLE");
    CHECK_EQ(std::string(Error(Status::unavailable, "x").name()), "AGENT_ERR_UNAVAILABLE");
}

TEST(options_agent_id_and_max_connections_to_json) {
    Options options;
    options.agent_id = "bot \"7\" \xc3\xa9";
    options.max_connections = 8;
    CHECK_EQ(options.to_json(), R"({"agent_id":"bot \"7\" )" "\xc3\xa9" R"(","max_connections":8})");
    Options bad_utf8;
    bad_utf8.agent_id = "a\xff";
    CHECK_ERROR(bad_utf8.to_json(), Status::invalid_argument);
    Options surrogate;
    surrogate.agent_id = "\xed\xa0\x80";
    CHECK_ERROR(surrogate.to_json(), Status::invalid_argument);
    Options nul;
    nul.agent_id = std::string("a\0b", 3);
    CHECK_ERROR(nul.to_json(), Status::invalid_argument);
}

TEST(bad_agent_id_and_max_connections_are_invalid_argument) {
    // The ids are given to the library as they are (not through open_store, which would make
    // them part of a longer one): the file, or on PostgreSQL the server.
    const auto file = path_in_dir("ids.db");
    const std::string where = g_pg ? g_pg_uri : file.string();
    for (const std::string &id : {std::string(), std::string(256, 'x')}) {
        Options options;
        options.agent_id = id;
        const Error e = CATCH_ERROR(Agent(where, options));
        CHECK(e.status() == Status::invalid_argument);
        CHECK(contains(e.what(), "agent_id"));
    }
    for (const std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1001}}) {
        Options options;
        options.max_connections = n;
        const Error e = CATCH_ERROR(open_store(":memory:", options));
        CHECK(e.status() == Status::invalid_argument);
        CHECK(contains(e.what(), "max_connections"));
    }
    // The longest id: 255 bytes (on PostgreSQL this run's own agent, padded).
    Options longest;
    longest.agent_id = g_pg ? agent_for(file.string()) : std::string();
    longest.agent_id->resize(255, 'x');
    longest.max_connections = 1000;
    Agent agent(where, longest);
    CHECK_EQ(agent.set_state(R"({"ok":true})"), R"({"ok":true})");
}

// The URI is the server's, never a file name: nothing is created in the working directory.
TEST(unreachable_server_is_status_unavailable) {
    const auto cwd = fs::current_path();
    fs::current_path(g_dir);
    Options options;
    options.agent_id = "a";
    options.busy_timeout_ms = 2000;
    for (const char *uri : {"postgresql:///postgres?host=/nonexistent-agent-state-dir&port=1&user=x",
                            "postgres:///postgres?host=/nonexistent-agent-state-dir&port=1&user=x"}) {
        const Error e = CATCH_ERROR(Agent(uri, options));
        CHECK(e.status() == Status::unavailable);
        CHECK(contains(e.what(), "agent_open"));
    }
    fs::current_path(cwd);
    CHECK(fs::is_empty(g_dir));
}

// Many agents in one store: one SQLite file, or (open_store) one prefix of agent ids on PostgreSQL.
TEST(agents_of_one_file_are_isolated) {
    const auto file = path_in_dir("many.db");
    Options a_options;
    a_options.agent_id = "a";
    a_options.initial_state = R"({"who":null})";
    Options b_options = a_options;
    b_options.agent_id = "b";
    Agent a = open_store(file, a_options);
    Agent b = open_store(file, b_options);
    a.set_state(R"({"who":"a"})");
    CHECK_EQ(b.get_state(), R"({"who":null})");
    b.set_state(R"({"who":"b"})");
    b.set_state(R"({"n":2})");
    CHECK_EQ(a.get_state(), R"({"who":"a"})");
    CHECK_EQ(a.get_state_versioned().version, std::uint64_t{1});
    CHECK_EQ(b.get_state_versioned().version, std::uint64_t{2});
    Options c_options;
    c_options.agent_id = "c";
    CHECK_EQ(open_store(file, c_options).get_state(), "{}");
}

TEST(options_change_log_to_json) {
    using agent_state::ChangeLog;
    Options last;
    last.change_log = ChangeLog::last(5);
    CHECK_EQ(last.to_json(), R"({"change_log":{"keep_last":5}})");
    Options seconds;
    seconds.change_log = ChangeLog::seconds(60);
    CHECK_EQ(seconds.to_json(), R"({"change_log":{"keep_seconds":60}})");
    Options both;
    both.read_only = true;
    both.change_log = ChangeLog::last(3);
    both.change_log->keep_seconds = 10;
    CHECK_EQ(both.to_json(), R"({"read_only":true,"change_log":{"keep_last":3,"keep_seconds":10}})");
    Options off;
    off.change_log = ChangeLog::disabled();
    CHECK_EQ(off.to_json(), R"({"change_log":false})");
    // Off with a retention is contradictory: refused by the wrapper.
    Options contradictory;
    contradictory.change_log = ChangeLog::disabled();
    contradictory.change_log->keep_last = 2;
    CHECK_ERROR(contradictory.to_json(), Status::invalid_argument);
    CHECK_ERROR(open_store(":memory:", contradictory), Status::invalid_argument);
    // On without any retention, or with 0, is refused by the library.
    Options empty;
    empty.change_log = ChangeLog();
    CHECK_EQ(empty.to_json(), R"({"change_log":{}})");
    CHECK_ERROR(open_store(path_in_dir("empty_log.db"), empty), Status::invalid_argument);
    CHECK_ERROR(open_store(path_in_dir("zero_log.db"), with_log(ChangeLog::last(0))),
                Status::invalid_argument);
    CHECK_ERROR(open_store_json(path_in_dir("raw_log.db"), R"({"change_log":true})"),
                Status::invalid_argument);
}

TEST(change_log_option_is_recorded_in_the_store_and_can_be_switched_off) {
    using agent_state::ChangeLog;
    const auto file = path_in_dir("log_switch.db");
    {
        Agent logged = open_store(file, with_log(ChangeLog::seconds(3600)));
        logged.set_state(R"({"a":1})");
        CHECK_EQ(without_times(logged.changes_since(0)),
                 R"([{"version":1,"at":0,"patch":{"a":1},"next":{"a":1}}])");
    }
    {
        // Another Agent without the option logs as well: the store says so.
        Agent plain = open_store(file);
        plain.set_state(R"({"b":2})");
        CHECK_EQ(count_of(plain.changes_since(0), "\"version\":"), 2u);
    }
    {
        Agent off = open_store(file, with_log(ChangeLog::disabled()));
        CHECK_ERROR(off.changes_since(0), Status::invalid_argument);
        CHECK_ERROR(off.poll(), Status::invalid_argument);
        off.set_state(R"({"c":3})");
        CHECK_EQ(off.get_state_versioned().version, 3u);  // versions go on without the log
        CHECK_EQ(off.state_at(3), R"({"a":1,"b":2,"c":3})");
        CHECK_ERROR(off.state_at(2), Status::gap);  // dropped with the log
    }
    Agent again = open_store(file, with_log(ChangeLog::last(10)));
    CHECK_EQ(again.changes_since(3), "[]");
    CHECK_ERROR(again.changes_since(0), Status::gap);  // versions 1 to 3 were never retained
}

TEST(versions_count_commits_and_persist) {
    const auto file = path_in_dir("versions.db");
    {
        Options options;
        options.initial_state = R"({"n":0})";
        Agent agent = open_store(file, options);
        const agent_state::Versioned v0 = agent.get_state_versioned();
        CHECK_EQ(v0.state, R"({"n":0})");
        CHECK_EQ(v0.version, 0u);
        agent.set_state(R"({"n":1})");
        CHECK_EQ(agent.get_state_versioned().version, 1u);
        agent.replace_state(R"({"m":2})");
        const agent_state::Versioned v2 = agent.get_state_versioned();
        CHECK_EQ(v2.state, R"({"m":2})");
        CHECK_EQ(v2.version, 2u);
        // Refused writes do not count.
        CHECK_ERROR(agent.set_state("[]"), Status::invalid_argument);
        CHECK_EQ(agent.get_state_versioned().version, 2u);
    }
    Agent reopened = open_store(file);
    CHECK_EQ(reopened.get_state_versioned().version, 2u);
    Agent other = open_store(file);
    other.set_state(R"({"o":1})");
    CHECK_EQ(reopened.get_state_versioned().version, 3u);  // counts every handle's commits
    CHECK_EQ(reopened.get_state_versioned().state, R"({"m":2,"o":1})");
}

TEST(compare_and_set_conflict_leaves_the_state_unchanged) {
    Agent agent = open_store(path_in_dir("cas.db"));
    std::vector<VersionedDelivery> log;
    agent.on_change(change_recorder(log));
    // Nothing stored: version 0 is expected.
    const Error early = CATCH_ERROR(agent.set_state_if(5, R"({"x":1})"));
    CHECK_EQ(status_text(early.status()), status_text(Status::conflict));
    CHECK(contains(early.what(), "agent_set_state_if"));
    CHECK_EQ(agent.get_state_versioned().version, 0u);
    CHECK_EQ(agent.get_state(), "{}");

    const agent_state::Versioned v1 = agent.set_state_if(0, R"({"x":1,"keep":[1,2]})");
    CHECK_EQ(v1.version, 1u);
    CHECK_EQ(v1.state, R"({"x":1,"keep":[1,2]})");
    const std::string before = agent.get_state();

    const Error stale = CATCH_ERROR(agent.replace_state_if(0, R"({"y":1})"));
    CHECK_EQ(status_text(stale.status()), status_text(Status::conflict));
    CHECK(contains(stale.what(), "agent_replace_state_if"));
    CHECK_ERROR(agent.set_state_if(0, R"({"x":2})"), Status::conflict);
    CHECK_ERROR(agent.set_state_if(2, R"({"x":2})"), Status::conflict);  // the future, too
    CHECK_EQ(agent.get_state(), before);  // byte-identical
    CHECK_EQ(agent.get_state_versioned().version, 1u);
    CHECK_EQ(log.size(), 1u);  // no delivery for a conflict

    const agent_state::Versioned v2 = agent.set_state_if(1, R"({"x":2})");
    CHECK_EQ(v2.version, 2u);
    CHECK_EQ(v2.state, R"({"x":2,"keep":[1,2]})");
    const agent_state::Versioned v3 = agent.replace_state_if(2, R"({"y":1})");
    CHECK_EQ(v3.version, 3u);
    CHECK_EQ(v3.state, R"({"y":1})");
    CHECK_EQ(log.size(), 3u);
    if (log.size() == 3) {
        CHECK_EQ(log[1].version, 2u);
        CHECK_EQ(log[1].patch.value_or("-"), R"({"x":2})");
        CHECK_EQ(log[2].version, 3u);
        CHECK(!log[2].patch.has_value());
    }
    // Inputs are checked as for set_state / replace_state.
    CHECK_ERROR(agent.set_state_if(3, "[]"), Status::invalid_argument);
    CHECK_ERROR(agent.replace_state_if(3, "{"), Status::json);
    CHECK_ERROR(agent.set_state_if(3, std::string_view()), Status::json);
    CHECK_EQ(agent.get_state_versioned().version, 3u);
}

TEST(compare_and_set_loops_on_separate_agents_count_exactly) {
    const int threads = g_quick ? 3 : 4;
    const int attempts = g_quick ? 20 : 80;
    const auto file = path_in_dir("rmw.db");
    { Agent create = open_store(file); }
    std::atomic<int> successes{0}, conflicts{0}, errors{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&] {
            try {
                Options options;
                options.synchronous = agent_state::Synchronous::normal;
                options.busy_timeout_ms = 30000;
                Agent agent = open_store(file, options);
                for (int k = 0; k < attempts; ++k) {
                    const agent_state::Versioned v = agent.get_state_versioned();
                    const std::size_t at = v.state.find("\"count\":");
                    const long n = at == std::string::npos
                                       ? 0
                                       : std::strtol(v.state.c_str() + at + 8, nullptr, 10);
                    try {
                        const agent_state::Versioned w = agent.set_state_if(
                            v.version, "{\"count\":" + std::to_string(n + 1) + "}");
                        if (w.version != v.version + 1) ++errors;
                        ++successes;
                    } catch (const Error &e) {
                        if (e.status() == Status::conflict) {
                            ++conflicts;
                        } else {
                            std::cout << "    " << e.what() << "\n";
                            ++errors;
                        }
                    }
                }
            } catch (const std::exception &e) {
                std::cout << "    thread: " << e.what() << "\n";
                ++errors;
            }
        });
    }
    for (auto &th : pool) th.join();
    CHECK_EQ(errors.load(), 0);
    CHECK_EQ(successes.load() + conflicts.load(), threads * attempts);
    Agent agent = open_store(file);
    const agent_state::Versioned final_state = agent.get_state_versioned();
    CHECK_EQ(final_state.state, "{\"count\":" + std::to_string(successes.load()) + "}");
    CHECK_EQ(final_state.version, static_cast<std::uint64_t>(successes.load()));
}

TEST(validator_rejects_with_its_message_and_no_hook_runs) {
    Agent agent = open_store(path_in_dir("gate.db"));
    std::vector<VersionedDelivery> log;
    agent.on_change(change_recorder(log));
    std::vector<VersionedDelivery> seen;  // what the validator was shown
    agent.set_validator([&seen](const agent_state::Change &c) {
        VersionedDelivery d{c.version, std::string(c.prev), std::string(c.next), std::nullopt};
        if (c.patch) d.patch = std::string(*c.patch);
        seen.push_back(d);
        if (contains(c.next, "\"balance\":-")) {
            throw std::domain_error("balance would go negative at version " +
                                    std::to_string(c.version));
        }
    });
    CHECK_EQ(agent.set_state(R"({"balance":10})"), R"({"balance":10})");
    const std::string before = agent.get_state();
    try {
        agent.set_state(R"({"balance":-5})");
        fail(__FILE__, __LINE__, "nothing thrown");
    } catch (const Error &e) {
        CHECK_EQ(status_text(e.status()), status_text(Status::rejected));
        CHECK(contains(e.what(), "agent_set_state"));
        CHECK(contains(e.what(), "balance would go negative at version 2"));
        // The validator's own exception is nested in the Error.
        try {
            std::rethrow_if_nested(e);
            fail(__FILE__, __LINE__, "no nested exception");
        } catch (const std::domain_error &inner) {
            CHECK_EQ(std::string(inner.what()), "balance would go negative at version 2");
        } catch (...) {
            fail(__FILE__, __LINE__, "the nested exception has the wrong type");
        }
    } catch (...) {
        fail(__FILE__, __LINE__, "not an agent_state::Error");
    }
    CHECK_EQ(agent.get_state(), before);
    CHECK_EQ(agent.get_state_versioned().version, 1u);
    CHECK_EQ(log.size(), 1u);  // no hook for the rejected change
    CHECK_EQ(seen.size(), 2u);
    if (seen.size() == 2) {
        CHECK_EQ(seen[1], (VersionedDelivery{2, R"({"balance":10})", R"({"balance":-5})",
                                             std::string(R"({"balance":-5})")}));
    }
    // Every kind of write is gated.
    CHECK_ERROR(agent.replace_state(R"({"balance":-1})"), Status::rejected);
    CHECK_ERROR(agent.set_state_if(1, R"({"balance":-1})"), Status::rejected);
    CHECK_ERROR(agent.replace_state_if(1, R"({"balance":-1})"), Status::rejected);
    // The conflict is found before the gate runs.
    const std::size_t gate_calls = seen.size();
    CHECK_ERROR(agent.set_state_if(0, R"({"balance":-1})"), Status::conflict);
    // So are malformed and unstorable inputs.
    CHECK_ERROR(agent.set_state(R"({"d":{"$date":"x"}})"), Status::codec);
    CHECK_ERROR(agent.set_state("{"), Status::json);
    CHECK_EQ(seen.size(), gate_calls);
    CHECK_EQ(agent.get_state(), before);
    CHECK_EQ(log.size(), 1u);
    // A validator that throws something that is not a std::exception rejects too.
    agent.set_validator([](const agent_state::Change &) { throw 7; });
    try {
        agent.replace_state(R"({"x":1})");
        fail(__FILE__, __LINE__, "nothing thrown");
    } catch (const Error &e) {
        CHECK_EQ(status_text(e.status()), status_text(Status::rejected));
        CHECK(contains(e.what(), "not a std::exception"));
        try {
            std::rethrow_if_nested(e);
        } catch (int v) {
            CHECK_EQ(v, 7);
        } catch (...) {
            fail(__FILE__, __LINE__, "wrong nested exception");
        }
    }
    // Without the validator the change commits, and the next call is not haunted.
    agent.clear_validator();
    CHECK_EQ(agent.set_state(R"({"balance":-5})"), R"({"balance":-5})");
    CHECK_EQ(log.size(), 2u);
    CHECK_EQ(agent.get_state_versioned().version, 2u);
}

TEST(validator_gates_restore_and_only_its_own_agent) {
    const auto file = path_in_dir("gate_scope.db");
    Agent gated = open_store(file, with_log(agent_state::ChangeLog::last(10)));
    Agent other = open_store(file);
    gated.set_state(R"({"v":"old"})");
    gated.set_state(R"({"v":"new"})");
    gated.set_validator([](const agent_state::Change &c) {
        if (contains(c.next, "old")) throw std::runtime_error("no going back");
    });
    const Error e = CATCH_ERROR(gated.restore(1));
    CHECK_EQ(status_text(e.status()), status_text(Status::rejected));
    CHECK(contains(e.what(), "agent_restore_state"));
    CHECK(contains(e.what(), "no going back"));
    CHECK_EQ(gated.get_state_versioned().version, 2u);
    // Another Agent on the same store is not gated by it.
    CHECK_EQ(other.set_state(R"({"v":"old"})"), R"({"v":"old"})");
    CHECK_EQ(gated.get_state(), R"({"v":"old"})");
}

TEST(validator_calling_its_own_agent_is_busy) {
    Agent agent = open_store(":memory:");
    Agent other = open_store(":memory:");
    other.set_state(R"({"other":1})");
    std::vector<Status> seen;
    std::string other_state;
    agent.set_validator([&](const agent_state::Change &) {
        try {
            agent.get_state();
        } catch (const Error &e) {
            seen.push_back(e.status());
        }
        try {
            agent.set_state(R"({"inner":1})");
        } catch (const Error &e) {
            seen.push_back(e.status());
        }
        try {
            agent.clear_validator();
        } catch (const Error &e) {
            seen.push_back(e.status());
        }
        other_state = other.get_state();  // another Agent is fine
    });
    CHECK_EQ(agent.set_state(R"({"a":1})"), R"({"a":1})");
    CHECK_EQ(seen.size(), 3u);
    for (Status s : seen) CHECK_EQ(status_text(s), status_text(Status::busy));
    CHECK_EQ(other_state, R"({"other":1})");
    // Letting the busy Error escape rejects the change; it is nested in the rejection.
    agent.set_validator([&](const agent_state::Change &) { (void)agent.get_state(); });
    try {
        agent.set_state(R"({"b":1})");
        fail(__FILE__, __LINE__, "nothing thrown");
    } catch (const Error &e) {
        CHECK_EQ(status_text(e.status()), status_text(Status::rejected));
        try {
            std::rethrow_if_nested(e);
        } catch (const Error &inner) {
            CHECK_EQ(status_text(inner.status()), status_text(Status::busy));
        }
    }
    CHECK_EQ(agent.get_state(), R"({"a":1})");
}

TEST(validator_function_is_destroyed_when_replaced_cleared_or_closed) {
    Agent agent = open_store(":memory:");
    auto token = std::make_shared<int>(0);
    agent.set_validator([token](const agent_state::Change &) {});
    CHECK_EQ(token.use_count(), 2);
    agent.set_validator([token](const agent_state::Change &) {});
    CHECK_EQ(token.use_count(), 2);  // the replaced one was destroyed
    agent.clear_validator();
    CHECK_EQ(token.use_count(), 1);
    agent.set_validator([token](const agent_state::Change &) {});
    agent.set_validator(nullptr);  // an empty function removes it too
    CHECK_EQ(token.use_count(), 1);
    agent.set_validator([token](const agent_state::Change &) {});
    agent.close();
    CHECK_EQ(token.use_count(), 1);
    CHECK_ERROR(agent.set_validator([token](const agent_state::Change &) {}), Status::bad_handle);
    CHECK_EQ(token.use_count(), 1);
    // A failed registration on a handle closed behind the wrapper's back destroys it too.
    Agent stale = open_store(":memory:");
    CHECK_EQ(agent_close(stale.handle()), AGENT_OK);
    CHECK_ERROR(stale.set_validator([token](const agent_state::Change &) {}), Status::bad_handle);
    CHECK_EQ(token.use_count(), 1);
}

TEST(on_change_sees_versions_and_follows_the_hook_rules) {
    Agent agent = open_store(":memory:");
    std::vector<VersionedDelivery> log;
    const agent_state::HookId id = agent.on_change(change_recorder(log));
    agent.set_state(R"({"a":1})");
    agent.replace_state(R"({"b":2})");
    agent.set_state_if(2, R"({"c":3})");
    CHECK_EQ(log.size(), 3u);
    if (log.size() == 3) {
        CHECK_EQ(log[0], (VersionedDelivery{1, "{}", R"({"a":1})", std::string(R"({"a":1})")}));
        CHECK_EQ(log[1], (VersionedDelivery{2, R"({"a":1})", R"({"b":2})", std::nullopt}));
        CHECK_EQ(log[2], (VersionedDelivery{3, R"({"b":2})", R"({"b":2,"c":3})",
                                            std::string(R"({"c":3})")}));
    }
    agent.remove_hook(id);
    agent.set_state(R"({"d":4})");
    CHECK_EQ(log.size(), 3u);
    CHECK_ERROR(agent.on_change(agent_state::ChangeFn()), Status::invalid_argument);
    // An exception is rethrown after the commit, as for on_state_changed.
    agent.on_change([](const agent_state::Change &c) {
        if (c.version == 5) throw std::logic_error("version 5");
    });
    try {
        agent.set_state(R"({"e":5})");
        fail(__FILE__, __LINE__, "nothing thrown");
    } catch (const std::logic_error &e) {
        CHECK_EQ(std::string(e.what()), "version 5");
    }
    CHECK_EQ(agent.get_state_versioned().version, 5u);
    // subscribe_changes removes its hook when destroyed.
    int calls = 0;
    {
        agent_state::Subscription sub =
            agent.subscribe_changes([&calls](const agent_state::Change &) { ++calls; });
        agent.set_state(R"({"f":6})");
    }
    agent.set_state(R"({"g":7})");
    CHECK_EQ(calls, 1);
}

TEST(poll_delivers_other_agents_changes_once_in_commit_order) {
    const auto file = path_in_dir("poll.db");
    Agent a = open_store(file, with_log(agent_state::ChangeLog::last(100)));
    Agent b = open_store(file);  // logs too: the store says so
    std::vector<VersionedDelivery> log;
    a.on_change(change_recorder(log));
    b.set_state(R"({"x":1})");
    b.replace_state(R"({"y":2})");
    CHECK_EQ(a.poll(), 2u);
    CHECK_EQ(a.poll(), 0u);  // each change once
    // A write through `a` first delivers what `b` committed before it.
    b.set_state(R"({"z":3})");
    a.set_state(R"({"w":4})");
    b.set_state(R"({"y":null})");
    CHECK_EQ(a.poll(), 1u);
    const std::vector<VersionedDelivery> expected = {
        {1, "{}", R"({"x":1})", std::string(R"({"x":1})")},
        {2, R"({"x":1})", R"({"y":2})", std::nullopt},
        {3, R"({"y":2})", R"({"y":2,"z":3})", std::string(R"({"z":3})")},
        {4, R"({"y":2,"z":3})", R"({"y":2,"z":3,"w":4})", std::string(R"({"w":4})")},
        {5, R"({"y":2,"z":3,"w":4})", R"({"z":3,"w":4})", std::string(R"({"y":null})")},
    };
    CHECK_EQ(log.size(), expected.size());
    for (std::size_t i = 0; i < std::min(log.size(), expected.size()); ++i) {
        CHECK_EQ(log[i], expected[i]);
    }
    for (std::size_t i = 1; i < log.size(); ++i) {
        CHECK_EQ(log[i].prev, log[i - 1].next);  // prev/next chain
        CHECK_EQ(log[i].version, log[i - 1].version + 1);
    }
    // `b` delivered a's {"w":4} (to no hook) before its own write of version 5; a hook
    // registered now sees only what comes later.
    std::vector<VersionedDelivery> b_log;
    b.on_change(change_recorder(b_log));
    CHECK_EQ(b.poll(), 0u);
    a.set_state(R"({"q":1})");
    CHECK_EQ(b.poll(), 1u);
    CHECK_EQ(b_log.size(), 1u);
    if (b_log.size() == 1) {
        CHECK_EQ(b_log[0], (VersionedDelivery{6, R"({"z":3,"w":4})", R"({"z":3,"w":4,"q":1})",
                                              std::string(R"({"q":1})")}));
    }
    // on_state_changed hooks get polled deliveries too.
    std::vector<Delivery> plain;
    a.on_state_changed(recorder(plain));
    b.set_state(R"({"p":1})");
    CHECK_EQ(a.poll(), 1u);
    CHECK_EQ(plain.size(), 1u);
    if (plain.size() == 1) {
        CHECK_EQ(plain[0].prev, R"({"z":3,"w":4,"q":1})");
        CHECK_EQ(plain[0].patch.value_or("-"), R"({"p":1})");
    }
}

TEST(poll_rethrows_a_hook_exception_after_all_deliveries) {
    const auto file = path_in_dir("poll_throw.db");
    Agent a = open_store(file, with_log(agent_state::ChangeLog::last(100)));
    Agent b = open_store(file);
    std::vector<std::uint64_t> versions;
    a.on_change([&versions](const agent_state::Change &c) {
        versions.push_back(c.version);
        if (c.version == 1) throw std::out_of_range("first");
    });
    b.set_state(R"({"a":1})");
    b.set_state(R"({"a":2})");
    try {
        a.poll();
        fail(__FILE__, __LINE__, "nothing thrown");
    } catch (const std::out_of_range &e) {
        CHECK_EQ(std::string(e.what()), "first");
    }
    CHECK_EQ(versions.size(), 2u);
    CHECK_EQ(a.poll(), 0u);
}

TEST(poll_without_the_change_log_is_invalid_argument) {
    Agent agent = open_store(path_in_dir("nolog.db"));
    const Error e = CATCH_ERROR(agent.poll());
    CHECK_EQ(status_text(e.status()), status_text(Status::invalid_argument));
    CHECK(contains(e.what(), "agent_poll"));
    CHECK(contains(e.what(), "change log"));
    CHECK_ERROR(agent.changes_since(0), Status::invalid_argument);
}

TEST(poll_reports_a_gap_after_pruning_with_keep_last_2) {
    const auto file = path_in_dir("gap.db");
    Agent a = open_store(file, with_log(agent_state::ChangeLog::last(2)));
    Agent b = open_store(file);
    std::vector<VersionedDelivery> log;
    a.on_change(change_recorder(log));
    for (int n = 1; n <= 5; ++n) b.set_state("{\"n\":" + std::to_string(n) + "}");
    // Retained: 4 and 5. 4's predecessor is gone, so only 5 can be delivered exactly.
    const Error e = CATCH_ERROR(a.poll());
    CHECK_EQ(status_text(e.status()), status_text(Status::gap));
    CHECK(contains(e.what(), "agent_poll"));
    CHECK(contains(e.what(), "changes 1 to 4"));
    CHECK_EQ(log.size(), 1u);
    if (log.size() == 1) {
        CHECK_EQ(log[0], (VersionedDelivery{5, R"({"n":4})", R"({"n":5})",
                                            std::string(R"({"n":5})")}));
    }
    CHECK_EQ(a.poll(), 0u);  // reported once
    CHECK_EQ(a.get_state(), R"({"n":5})");
    CHECK_ERROR(a.changes_since(2), Status::gap);
    CHECK_ERROR(a.state_at(3), Status::gap);
    CHECK_EQ(a.state_at(4), R"({"n":4})");
    b.set_state(R"({"n":6})");
    CHECK_EQ(a.poll(), 1u);
}

TEST(changes_since_state_at_and_restore) {
    Options options = with_log(agent_state::ChangeLog::last(3));
    options.initial_state = R"({"init":true})";
    Agent agent = open_store(path_in_dir("pitr.db"), options);
    CHECK_EQ(agent.changes_since(0), "[]");
    for (int n = 1; n <= 5; ++n) agent.set_state("{\"n\":" + std::to_string(n) + "}");
    // Versions 3, 4, 5 are retained.
    const std::string since = agent.changes_since(3);
    CHECK_EQ(without_times(since),
             R"([{"version":4,"at":0,"patch":{"n":4},"next":{"init":true,"n":4}},)"
             R"({"version":5,"at":0,"patch":{"n":5},"next":{"init":true,"n":5}}])");
    const std::size_t at = since.find("\"at\":");
    const long long ms = at == std::string::npos ? 0 : std::atoll(since.c_str() + at + 5);
    CHECK(ms > 1700000000000LL);
    CHECK_EQ(agent.changes_since(5), "[]");
    CHECK_ERROR(agent.changes_since(1), Status::gap);
    CHECK_ERROR(agent.changes_since(9), Status::invalid_argument);
    CHECK_EQ(agent.state_at(3), R"({"init":true,"n":3})");
    CHECK_EQ(agent.state_at(5), R"({"init":true,"n":5})");
    CHECK_EQ(agent.state_at(0), R"({"init":true})");  // the initial state
    CHECK_ERROR(agent.state_at(2), Status::gap);
    CHECK_ERROR(agent.state_at(6), Status::invalid_argument);

    std::vector<VersionedDelivery> log;
    agent.on_change(change_recorder(log));
    const agent_state::Versioned restored = agent.restore(3);
    CHECK_EQ(restored.version, 6u);
    CHECK_EQ(restored.state, R"({"init":true,"n":3})");
    CHECK_EQ(agent.get_state(), R"({"init":true,"n":3})");
    CHECK_EQ(log.size(), 1u);
    if (log.size() == 1) {
        CHECK_EQ(log[0], (VersionedDelivery{6, R"({"init":true,"n":5})", R"({"init":true,"n":3})",
                                            std::nullopt}));  // a replacement
    }
    CHECK(contains(agent.changes_since(5), R"("patch":null)"));
    // Restoring version 0 restores the initial state; what is not retained cannot be restored.
    CHECK_EQ(agent.restore(0).state, R"({"init":true})");
    CHECK_ERROR(agent.restore(2), Status::gap);
    CHECK_ERROR(agent.restore(99), Status::invalid_argument);
    CHECK_EQ(agent.get_state_versioned().version, 7u);
}

TEST(new_calls_on_a_closed_agent_are_bad_handle) {
    Agent agent = open_store(":memory:", with_log(agent_state::ChangeLog::last(5)));
    agent.close();
    CHECK_ERROR(agent.get_state_versioned(), Status::bad_handle);
    CHECK_ERROR(agent.set_state_if(0, "{}"), Status::bad_handle);
    CHECK_ERROR(agent.replace_state_if(0, "{}"), Status::bad_handle);
    CHECK_ERROR(agent.on_change([](const agent_state::Change &) {}), Status::bad_handle);
    CHECK_ERROR(agent.set_validator([](const agent_state::Change &) {}), Status::bad_handle);
    CHECK_ERROR(agent.clear_validator(), Status::bad_handle);
    CHECK_ERROR(agent.poll(), Status::bad_handle);
    CHECK_ERROR(agent.changes_since(0), Status::bad_handle);
    CHECK_ERROR(agent.state_at(0), Status::bad_handle);
    CHECK_ERROR(agent.restore(0), Status::bad_handle);
    // Closed behind the wrapper's back: the library reports it.
    Agent stale = open_store(":memory:", with_log(agent_state::ChangeLog::last(5)));
    CHECK_EQ(agent_close(stale.handle()), AGENT_OK);
    const Error e = CATCH_ERROR(stale.poll());
    CHECK_EQ(status_text(e.status()), status_text(Status::bad_handle));
    CHECK(contains(e.what(), "agent_poll"));
    CHECK_ERROR(stale.restore(0), Status::bad_handle);
}

// ---------------------------------------------------------------------------------------------
// Move semantics.

TEST(moved_from_agent_is_closed_and_throws_clearly) {
    Agent agent = open_store(":memory:");
    agent.set_state(R"({"a":1})");
    const AgentHandle h = agent.handle();
    Agent moved(std::move(agent));
    CHECK_EQ(moved.handle(), h);
    CHECK(!agent.is_open());  // NOLINT(bugprone-use-after-move): moved-from is specified closed
    CHECK_EQ(agent.handle(), 0u);
    const Error e = CATCH_ERROR(agent.set_state("{}"));
    CHECK(e.status() == Status::bad_handle);
    CHECK(contains(e.what(), "moved from"));
    CHECK(contains(e.what(), "set_state"));
    agent.close();  // no-op
    CHECK_EQ(moved.get_state(), R"({"a":1})");
}

TEST(move_assignment_closes_the_previous_handle) {
    Agent a = open_store(":memory:");
    Agent b = open_store(":memory:");
    a.set_state(R"({"who":"a"})");
    b.set_state(R"({"who":"b"})");
    const AgentHandle old_a = a.handle();
    const AgentHandle old_b = b.handle();
    auto token = std::make_shared<int>(0);
    a.on_state_changed([token](auto, auto, auto) {});
    a = std::move(b);
    CHECK_EQ(a.handle(), old_b);
    CHECK_EQ(a.get_state(), R"({"who":"b"})");
    CHECK(!b.is_open());  // NOLINT(bugprone-use-after-move)
    AgentBuffer raw{nullptr, 0, nullptr};
    CHECK_EQ(agent_get_state(old_a, &raw), AGENT_ERR_BAD_HANDLE);  // closed by the assignment
    CHECK_EQ(token.use_count(), 1);
    // Self-move-assignment keeps the agent open.
    Agent &same = a;
    a = std::move(same);
    CHECK(a.is_open());
    CHECK_EQ(a.get_state(), R"({"who":"b"})");
    // Agents live in containers.
    std::vector<Agent> agents;
    for (int i = 0; i < 5; ++i) {
        agents.push_back(open_store(":memory:"));
        agents.back().set_state("{\"i\":" + std::to_string(i) + "}");
    }
    for (int i = 0; i < 5; ++i) CHECK_EQ(agents[static_cast<std::size_t>(i)].get_state(),
                                        "{\"i\":" + std::to_string(i) + "}");
}

TEST(release_and_adopt) {
    Agent agent = open_store(":memory:");
    agent.set_state(R"({"a":1})");
    const AgentHandle h = agent.release();
    CHECK(!agent.is_open());
    Agent again = Agent::adopt(h);
    CHECK_EQ(again.get_state(), R"({"a":1})");
}

// ---------------------------------------------------------------------------------------------
// Threads.

TEST(threads_sharing_one_agent_lose_no_update) {
    const int threads = g_quick ? 4 : 8;
    const int writes = g_quick ? 25 : 150;
    Options options;
    options.synchronous = agent_state::Synchronous::normal;
    Agent agent = open_store(path_in_dir("threads.db"), options);
    std::mutex mu;
    std::vector<std::pair<std::string, std::string>> deliveries;  // (prev, next)
    agent.on_state_changed([&](std::string_view next, std::string_view prev, auto) {
        std::lock_guard<std::mutex> lock(mu);
        deliveries.emplace_back(std::string(prev), std::string(next));
    });
    std::atomic<int> errors{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            for (int k = 1; k <= writes; ++k) {
                try {
                    const std::string key = "\"t" + std::to_string(t) + "\"";
                    const std::string state =
                        agent.set_state("{" + key + ":" + std::to_string(k) + "}");
                    if (!contains(state, key + ":" + std::to_string(k))) ++errors;
                    if (k % 10 == 0) (void)agent.get_state();
                } catch (...) {
                    ++errors;
                }
            }
        });
    }
    for (auto &th : pool) th.join();
    CHECK_EQ(errors.load(), 0);
    const std::string final_state = agent.get_state();
    for (int t = 0; t < threads; ++t) {
        CHECK(contains(final_state, "\"t" + std::to_string(t) + "\":" + std::to_string(writes)));
    }
    CHECK_EQ(deliveries.size(), static_cast<std::size_t>(threads * writes));
    if (!deliveries.empty()) {
        CHECK_EQ(deliveries.front().first, "{}");
        CHECK_EQ(deliveries.back().second, final_state);
    }
    for (std::size_t i = 1; i < deliveries.size(); ++i) {
        if (deliveries[i].first != deliveries[i - 1].second) {
            fail(__FILE__, __LINE__, "delivery " + std::to_string(i) + " does not chain");
            break;
        }
    }
}

TEST(threads_and_nested_writes_from_hooks_stay_ordered) {
    const int threads = g_quick ? 3 : 4;
    const int writes = g_quick ? 10 : 50;
    Agent agent = open_store(":memory:");
    std::mutex mu;
    std::vector<std::pair<std::string, std::string>> deliveries;
    agent.on_state_changed([&](std::string_view next, std::string_view prev, auto) {
        {
            std::lock_guard<std::mutex> lock(mu);
            deliveries.emplace_back(std::string(prev), std::string(next));
        }
        // Every write with "echo" is followed by a nested write that removes it.
        if (contains(next, "\"echo\"")) agent.set_state(R"({"echo":null})");
    });
    std::atomic<int> errors{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            for (int k = 1; k <= writes; ++k) {
                try {
                    agent.set_state("{\"t" + std::to_string(t) + "\":" + std::to_string(k) +
                                    ",\"echo\":true}");
                } catch (...) {
                    ++errors;
                }
            }
        });
    }
    for (auto &th : pool) th.join();
    CHECK_EQ(errors.load(), 0);
    const std::string final_state = agent.get_state();
    CHECK(!contains(final_state, "echo"));
    for (int t = 0; t < threads; ++t) {
        CHECK(contains(final_state, "\"t" + std::to_string(t) + "\":" + std::to_string(writes)));
    }
    // Each write with "echo" may be followed by its nested write or by another thread's write
    // (whose own nested write then removes "echo"), so count at least one delivery per write.
    CHECK(deliveries.size() >= static_cast<std::size_t>(threads * writes));
    for (std::size_t i = 1; i < deliveries.size(); ++i) {
        if (deliveries[i].first != deliveries[i - 1].second) {
            fail(__FILE__, __LINE__, "delivery " + std::to_string(i) + " does not chain");
            break;
        }
    }
}

TEST(threads_with_separate_connections_lose_no_update) {
    const int threads = g_quick ? 3 : 4;
    const int writes = g_quick ? 15 : 60;
    const auto file = path_in_dir("connections.db");
    { Agent create = open_store(file); }
    std::atomic<int> errors{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            try {
                Options options;
                options.synchronous = agent_state::Synchronous::normal;
                options.busy_timeout_ms = 30000;
                Agent agent = open_store(file, options);
                for (int k = 1; k <= writes; ++k) {
                    agent.set_state("{\"c" + std::to_string(t) + "_" + std::to_string(k) + "\":1}");
                }
            } catch (const std::exception &e) {
                std::cout << "    thread " << t << ": " << e.what() << "\n";
                ++errors;
            }
        });
    }
    for (auto &th : pool) th.join();
    CHECK_EQ(errors.load(), 0);
    Agent agent = open_store(file);
    const std::string state = agent.get_state();
    int keys = 0;
    for (std::size_t pos = 0; (pos = state.find("\"c", pos)) != std::string::npos; ++pos) ++keys;
    CHECK_EQ(keys, threads * writes);
}

TEST(hook_exception_goes_to_the_writing_thread) {
    Agent agent = open_store(":memory:");
    agent.on_state_changed([](std::string_view next, auto, auto) {
        if (contains(next, "\"bad\"")) throw std::runtime_error("bad write");
    });
    std::atomic<int> thrown{0}, clean{0}, wrong{0};
    const int rounds = g_quick ? 10 : 50;
    auto worker = [&](bool bad) {
        for (int i = 0; i < rounds; ++i) {
            try {
                agent.replace_state(bad ? R"({"bad":1})" : R"({"good":1})");
                ++clean;
            } catch (const std::runtime_error &) {
                // A good write may follow a bad one: only the writer of "bad" sees the error.
                bad ? ++thrown : ++wrong;
            }
        }
    };
    std::thread bad_thread(worker, true);
    std::thread good_thread(worker, false);
    bad_thread.join();
    good_thread.join();
    CHECK_EQ(thrown.load(), rounds);
    CHECK_EQ(clean.load(), rounds);
    CHECK_EQ(wrong.load(), 0);
}

TEST(close_racing_with_writers_is_clean) {
    Agent agent = open_store(":memory:");
    std::atomic<bool> stop{false};
    std::atomic<int> unexpected{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < 3; ++t) {
        pool.emplace_back([&] {
            while (!stop.load()) {
                try {
                    agent.set_state(R"({"x":1})");
                } catch (const Error &e) {
                    if (e.status() != Status::bad_handle) ++unexpected;
                    return;
                }
            }
        });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    agent.close();
    stop = true;
    for (auto &th : pool) th.join();
    CHECK_EQ(unexpected.load(), 0);
    CHECK(!agent.is_open());
}

// ---------------------------------------------------------------------------------------------

int main() {
    g_quick = std::getenv("AGENT_TEST_QUICK") != nullptr;
    const char *backend = std::getenv("AGENT_STATE_TEST_BACKEND");
    if (backend != nullptr && std::strcmp(backend, "postgres") == 0) {
        const char *uri = std::getenv("AGENT_STATE_TEST_PG_URI");
        if (uri == nullptr || uri[0] == 0) {
            std::cerr << "AGENT_STATE_TEST_BACKEND=postgres needs AGENT_STATE_TEST_PG_URI\n";
            return 2;
        }
        g_pg_uri = uri;
        if (g_pg_uri.rfind("postgres://", 0) != 0 && g_pg_uri.rfind("postgresql://", 0) != 0) {
            std::cerr << "AGENT_STATE_TEST_PG_URI=" << g_pg_uri << " is not a postgres:// URI\n";
            return 2;
        }
        g_pg = true;
        std::ostringstream prefix;
        prefix << "cpp_" << getpid() << "_" << std::hex << static_cast<long>(std::time(nullptr))
               << "_";
        g_agent_prefix = prefix.str();
    } else if (backend != nullptr && backend[0] != 0 && std::strcmp(backend, "sqlite") != 0) {
        std::cerr << "AGENT_STATE_TEST_BACKEND=" << backend << ": want sqlite or postgres\n";
        return 2;
    }
    char tmpl[] = "/tmp/agent_state_cpp_XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
        std::perror("mkdtemp");
        return 2;
    }
    const fs::path root = tmpl;
    if (g_pg) {
        std::cout << "agent_state " << agent_state::version() << " C++ tests"
                  << (g_quick ? " (quick)" : "") << " on PostgreSQL (" << g_pg_uri << "), agents "
                  << g_agent_prefix << "*\n";
        try {
            g_dir = root;
            open_store(":memory:").close();
        } catch (const Error &e) {
            // Stop here: tests that wait for a hook or a thread could wait for ever.
            std::cout << "FAIL opening an agent on the server: " << e.what()
                      << "\n0 passed, 1 failed\n";
            std::error_code ignored;
            fs::remove_all(root, ignored);
            return 1;
        }
    } else {
        std::cout << "agent_state " << agent_state::version() << " C++ tests"
                  << (g_quick ? " (quick)" : "") << " on SQLite, store files in " << root.string()
                  << "\n";
    }
    int passed = 0, failed = 0, skipped = 0, index = 0;
    for (const TestCase &test : registry()) {
        g_test_index = index++;
        if (g_pg && test.sqlite_only != nullptr) {
            ++skipped;
            std::cout << "skip " << test.name << " (SQLite only: " << test.sqlite_only << ")\n";
            continue;
        }
        g_dir = root / std::to_string(g_test_index);
        fs::create_directories(g_dir);
        g_failures = 0;
        try {
            test.fn();
        } catch (const std::exception &e) {
            fail(__FILE__, __LINE__, std::string("uncaught exception: ") + e.what());
        } catch (...) {
            fail(__FILE__, __LINE__, "uncaught non-standard exception");
        }
        if (g_failures == 0) {
            ++passed;
            std::cout << "ok   " << test.name << "\n";
        } else {
            ++failed;
            std::cout << "FAIL " << test.name << "\n";
        }
        std::cout.flush();
    }
    std::error_code ignored;
    fs::remove_all(root, ignored);
    if (skipped > 0) std::cout << skipped << " tests skipped (SQLite only)\n";
    std::cout << passed << " passed, " << failed << " failed\n";
    return failed == 0 ? 0 : 1;
}
