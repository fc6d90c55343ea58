// The C++ wrapper's tests (tests/cpp/main.cpp runs them): the newer status codes, agent_id
// and max_connections, the change log option, versions and compare-and-set.

#include "harness.hpp"

TEST_FILE(5);

// ---------------------------------------------------------------------------------------------
// Versions, compare-and-set, the validator and the change log (the validator and the change
// log in change_log.cpp).

namespace {
// Counts `needle` in `haystack`.
std::size_t count_of(std::string_view haystack, std::string_view needle) {
    std::size_t n = 0;
    for (std::size_t pos = haystack.find(needle); pos != std::string_view::npos;
         pos = haystack.find(needle, pos + 1)) {
        ++n;
    }
    return n;
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
    CHECK_EQ(std::string(agent_state::status_name(Status::auth)), "AGENT_ERR_AUTH");
    CHECK_EQ(std::string(agent_state::status_name(Status::cancelled)), "AGENT_ERR_CANCELLED");
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
                 R"([{"version":1,"at":0,"kind":"merge","schema":0,"migrated_from":null,"patch":{"a":1},"next":{"a":1}}])");
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

TEST(a_write_that_changes_nothing_commits_nothing) {
    Agent agent = open_store(path_in_dir("noop.db"));
    std::vector<VersionedDelivery> log;
    agent.on_change(change_recorder(log));
    CHECK_EQ(agent.set_state_if(0, R"({"x":1,"list":[1,2]})").version, 1u);
    // {} and members set to what they are: the same state, the same version, no delivery.
    CHECK_EQ(agent.set_state("{}"), R"({"x":1,"list":[1,2]})");
    CHECK_EQ(agent.set_state(R"({"x":1,"gone":null})"), R"({"x":1,"list":[1,2]})");
    CHECK_EQ(agent.replace_state(R"({"x":1,"list":[1,2]})"), R"({"x":1,"list":[1,2]})");
    const agent_state::Versioned same = agent.set_state_if(1, R"({"list":[1,2]})");
    CHECK_EQ(same.version, 1u);
    CHECK_EQ(same.state, R"({"x":1,"list":[1,2]})");
    CHECK_ERROR(agent.set_state_if(0, "{}"), Status::conflict);  // the version is checked first
    CHECK_EQ(agent.get_state_versioned().version, 1u);
    CHECK_EQ(log.size(), 1u);
    CHECK_EQ(agent.set_state_if(1, R"({"x":2})").version, 2u);
    CHECK_EQ(log.size(), 2u);
}

TEST(options_store_max_value_bytes_to_json_and_the_store_keeps_it) {
    Options options;
    options.store_max_value_bytes = 4000000;
    CHECK_EQ(options.to_json(), R"({"store_max_value_bytes":4000000})");
    const auto file = path_in_dir("store_cap.db");
    { Agent recorder = open_store(file, options); }
    // Over the default cap (2097152), under the store's: a handle with the defaults writes it.
    const std::string big = R"({"s":")" + std::string(3000000, 'z') + R"("})";
    Agent later = open_store(file);
    CHECK_EQ(later.replace_state(big).size(), big.size());
    Options smaller;
    smaller.max_value_bytes = 1000000;
    Agent own = open_store(file, smaller);
    const Error refused = CATCH_ERROR(own.set_state(R"({"t":1})"));
    CHECK_EQ(status_text(refused.status()), status_text(Status::too_large));
    CHECK(contains(refused.what(), "this handle's max_value_bytes (1000000)"));
}
