// The C++ wrapper's tests (tests/cpp/main.cpp runs them): a store's agents, list_agents(),
// delete_agent() and expire_agents() (bindings/cpp/agent_state/store.hpp), on both backends.
// On PostgreSQL the store is the server's, shared with every other test and process: each test
// uses ids under a prefix of its own and lists with it; expiry ages its agents to January
// 1970, before anything else a test writes, and every test deletes its agents at its end.

#include "harness.hpp"

#include <future>
#include <map>

TEST_FILE(9);

using agent_state::AgentInfo;

namespace {

// A store for a test of a store's agents: a SQLite file in the test's directory, or the
// server; `prefix` is the test's own part of the ids. Deletes the test's agents at its end.
struct Store {
    std::string path;
    std::string prefix;

    Store() {
        if (g_pg) {
            path = g_pg_uri;
            prefix = g_agent_prefix + std::to_string(g_test_index) + "/";
        } else {
            path = path_in_dir("agents.db").string();
            prefix = "t/";
        }
    }
    Store(const Store &) = delete;
    Store &operator=(const Store &) = delete;
    ~Store() {
        if (!g_pg) return;
        try {
            for (;;) {
                const auto page = agent_state::list_agents(path, Options(), prefix);
                if (page.empty()) return;
                for (const auto &info : page) agent_state::delete_agent(path, info.id);
            }
        } catch (const std::exception &e) {
            std::cout << "    cleaning up " << prefix << "*: " << e.what() << "\n";
        }
    }

    Agent open(const std::string &name, Options options = Options()) const {
        options.agent_id = prefix + name;
        return Agent(path, options);
    }

    // The ids of `infos` without the prefix, joined by spaces.
    std::string names(const std::vector<AgentInfo> &infos) const {
        std::string out;
        for (const auto &info : infos) {
            if (!out.empty()) out.push_back(' ');
            out += info.id.rfind(prefix, 0) == 0 ? info.id.substr(prefix.size()) : "!" + info.id;
        }
        return out;
    }

    std::string list(std::optional<std::string> sub = std::nullopt,
                     std::optional<std::string> after = std::nullopt,
                     std::uint32_t limit = agent_state::default_list_limit) const {
        std::optional<std::string> full_after;
        if (after) full_after = prefix + *after;
        return names(agent_state::list_agents(
            path, Options(), prefix + sub.value_or(""),
            full_after ? std::optional<std::string_view>(*full_after) : std::nullopt, limit));
    }
};

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

bool have(const char *tool) {
    const std::string cmd = std::string("command -v ") + tool + " >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0;
}

// Makes the agents `written` ({id, ms since the epoch}) of the store look last written then,
// as a store would after that long: written_ms and its minute, written_grain, set by SQL (the
// sqlite3 shell, psql). False, with a line saying so, when there is no such client.
bool age_agents(const Store &store, const std::vector<std::pair<std::string, std::int64_t>> &written) {
    const char *tool = g_pg ? "psql" : "sqlite3";
    if (!have(tool)) {
        std::cout << "    (aging agents needs " << tool << ", not on PATH: the expiry of aged agents is not tested)\n";
        return false;
    }
    const fs::path script = path_in_dir("age.sql");
    const fs::path result = path_in_dir("age.out");
    {
        std::ofstream out(script);
        for (const auto &[id, ms] : written) {
            std::string quoted;
            for (const char c : id) {
                quoted.push_back(c);
                if (c == '\'') quoted.push_back('\'');
            }
            const std::int64_t grain = ms - ms % 60000;
            if (g_pg) {
                out << "WITH u AS (UPDATE agent_state SET written_ms = " << ms
                    << ", written_grain = " << grain << " WHERE agent = '" << quoted
                    << "' RETURNING 1) SELECT count(*) FROM u;\n";
            } else {
                out << "UPDATE agent_state SET written_ms = " << ms << ", written_grain = " << grain
                    << " WHERE agent = '" << quoted << "'; SELECT changes();\n";
            }
        }
    }
    auto quote = [](const std::string &s) {
        std::string q = "'";
        for (const char c : s) {
            if (c == '\'') q += "'\\''";
            else q.push_back(c);
        }
        return q + "'";
    };
    std::string cmd;
    if (g_pg) {
        const char *server = std::getenv("AGENT_STATE_TEST_PG_SERVER_URI");  // behind a pooler
        const std::string uri = server != nullptr && server[0] != 0 ? server : g_pg_uri;
        cmd = "psql -X -q -t -A -v ON_ERROR_STOP=1 -d " + quote(uri) + " -f " + quote(script.string());
    } else {
        cmd = "sqlite3 -bail -cmd '.timeout 30000' " + quote(store.path) + " < " + quote(script.string());
    }
    cmd += " > " + quote(result.string()) + " 2>&1";
    const int rc = std::system(cmd.c_str());
    std::string expected;
    for (std::size_t k = 0; k < written.size(); ++k) expected += "1\n";
    const std::string got = read_file(result);
    if (rc != 0 || got != expected) {
        fail(__FILE__, __LINE__, "aging agents: exit " + std::to_string(rc) + ", output:\n" + got);
        return false;
    }
    return true;
}

}  // namespace

// Ordered by id (bytes of the UTF-8), paged with `after`, filtered by `prefix`; each entry's
// version, size and time; agents never written are not listed; bad arguments.
TEST(list_agents_orders_pages_and_filters) {
    Store store;
    const std::int64_t before = now_ms();
    std::vector<Agent> agents;
    std::map<std::string, std::uint64_t> versions;
    for (const char *name : {"b", "a", "c/2", "\xc3\xa9", "c/1", "q\"\\\x01"}) {
        agents.push_back(store.open(name));
        agents.back().set_state("{\"name\":" + agent_state::json_quote(name) + "}");
        versions[store.prefix + name] = agents.back().get_state_versioned().version;
    }
    agents[1].set_state(R"({"more":"a longer state than the others"})");
    versions[store.prefix + "a"] = agents[1].get_state_versioned().version;
    Agent never = store.open("never");  // opened, never written: not listed
    const std::int64_t after = now_ms();

    const auto all = agent_state::list_agents(store.path, Options(), store.prefix);
    CHECK_EQ(store.names(all), std::string("a b c/1 c/2 q\"\\\x01 \xc3\xa9"));
    for (const auto &info : all) {
        CHECK_EQ(info.version, versions[info.id]);
        CHECK_EQ(info.version, std::uint64_t(info.id == store.prefix + "a" ? 2 : 1));
        CHECK(info.bytes > 0);
        CHECK(info.written_at_ms >= before - 1000 && info.written_at_ms <= after + 1000);
        CHECK(info.written_at() == std::chrono::system_clock::time_point(
                                       std::chrono::milliseconds(info.written_at_ms)));
    }
    if (all.size() == 6) CHECK(all[0].bytes > all[1].bytes);  // a's state is the longer

    // Pages of 2, each after the last id of the one before.
    std::vector<std::string> pages;
    std::optional<std::string> last;
    for (int k = 0; k < 10; ++k) {
        const auto page = agent_state::list_agents(
            store.path, Options(), store.prefix,
            last ? std::optional<std::string_view>(*last) : std::nullopt, 2);
        pages.push_back(store.names(page));
        if (page.size() < 2) break;
        last = page.back().id;
    }
    CHECK_EQ(pages.size(), std::size_t(4));
    if (pages.size() == 4) {
        CHECK_EQ(pages[0], "a b");
        CHECK_EQ(pages[1], "c/1 c/2");
        CHECK_EQ(pages[2], std::string("q\"\\\x01 \xc3\xa9"));
        CHECK_EQ(pages[3], "");
    }
    CHECK_EQ(store.list(std::nullopt, std::string("b")), std::string("c/1 c/2 q\"\\\x01 \xc3\xa9"));
    CHECK_EQ(store.list(std::string("c/")), "c/1 c/2");
    CHECK_EQ(store.list(std::string("c/"), std::string("c/1"), 1), "c/2");
    CHECK_EQ(store.list(std::string("zzz")), "");
    CHECK_EQ(agent_state::list_agents(store.path, Options(), store.prefix, std::nullopt,
                                      agent_state::max_list_limit)
                 .size(),
             std::size_t(6));

    CHECK_ERROR(agent_state::list_agents(store.path, Options(), std::nullopt, std::nullopt, 0),
                Status::invalid_argument);
    CHECK_ERROR(agent_state::list_agents(store.path, Options(), std::nullopt, std::nullopt,
                                         agent_state::max_list_limit + 1),
                Status::invalid_argument);
    CHECK_ERROR(agent_state::list_agents(store.path, Options(), std::string("a\0b", 3)),
                Status::invalid_argument);
    CHECK_ERROR(agent_state::list_agents(store.path, Options(), std::nullopt, std::string("\xff")),
                Status::invalid_argument);
    CHECK_ERROR(agent_state::list_agents(store.path, Options(), std::string(256, 'x')),
                Status::invalid_argument);
    CHECK_ERROR(agent_state::list_agents(""), Status::invalid_argument);
    CHECK_ERROR(agent_state::list_agents(store.path + std::string("\0", 1)), Status::invalid_argument);
}

// A SQLite file's single agent is listed with the id "", first; `after` "" (not std::nullopt)
// continues after it; a missing store is not created.
SQLITE_ONLY_TEST(list_agents_the_single_agent_of_a_file_and_no_store,
                 "a file's single agent, and a missing file") {
    const std::string path = path_in_dir("agents.db").string();
    Agent single(path);
    single.set_state(R"({"single":true})");
    Options x_options;
    x_options.agent_id = "x";
    Agent x(path, x_options);
    x.set_state(R"({"x":1})");

    const auto all = agent_state::list_agents(path);
    CHECK_EQ(all.size(), std::size_t(2));
    if (all.size() == 2) {
        CHECK_EQ(all[0].id, "");
        CHECK_EQ(all[1].id, "x");
    }
    const auto next = agent_state::list_agents(path, Options(), std::nullopt, std::string_view(""), 1);
    CHECK_EQ(next.size(), std::size_t(1));
    if (next.size() == 1) CHECK_EQ(next[0].id, "x");
    CHECK_EQ(agent_state::delete_agent(path, "").value_or(0), std::uint64_t(1));
    CHECK_EQ(single.get_state_versioned().state, "{}");
    CHECK_EQ(single.get_state_versioned().version, std::uint64_t(0));
    CHECK_EQ(agent_state::list_agents(path).size(), std::size_t(1));

    const std::string missing = path_in_dir("none.db").string();
    CHECK_ERROR(agent_state::list_agents(missing), Status::storage);
    CHECK_ERROR(agent_state::delete_agent(missing, "x"), Status::storage);
    CHECK_ERROR(agent_state::expire_agents(missing, std::chrono::hours(1), Options(), 10, true),
                Status::storage);
    CHECK(!fs::exists(missing));
}

// Deleting: if_version checks the version; open handles then read their initial state at
// version 0; poll() and the next write deliver the deletion to their hooks as one change
// (version 0, no patch); versions never go back.
TEST(delete_agent_semantics) {
    Store store;
    Options a_options = with_log(agent_state::ChangeLog::last(100));
    a_options.initial_state = R"({"init":true})";
    Agent a = store.open("victim", a_options);
    Options b_options;
    b_options.initial_state = R"({"mine":1})";
    Agent b = store.open("victim", b_options);
    Agent other = store.open("other");
    other.set_state(R"({"other":1})");
    a.set_state(R"({"n":1})");
    const std::uint64_t first = a.get_state_versioned().version;
    a.set_state(R"({"n":2})");
    a.set_state(R"({"n":3})");
    const std::uint64_t last = a.get_state_versioned().version;
    CHECK_EQ(first, std::uint64_t(1));
    CHECK_EQ(last, std::uint64_t(3));
    b.poll();  // b has seen a's writes
    std::vector<VersionedDelivery> a_seen, b_seen;
    a.on_change(change_recorder(a_seen));
    b.on_change(change_recorder(b_seen));
    const std::string id = store.prefix + "victim";

    CHECK_ERROR(agent_state::delete_agent(store.path, id, Options(), last - 1), Status::conflict);
    CHECK_EQ(b.get_state_versioned().version, last);
    CHECK_EQ(agent_state::delete_agent(store.path, id, Options(), last).value_or(0), std::uint64_t(last));
    CHECK_EQ(store.list(), "other");
    CHECK_EQ(a.get_state_versioned().state, R"({"init":true})");
    CHECK_EQ(a.get_state_versioned().version, std::uint64_t(0));
    CHECK_EQ(b.get_state_versioned().state, R"({"mine":1})");
    CHECK_EQ(b.get_state_versioned().version, std::uint64_t(0));
    CHECK_EQ(other.get_state(), R"({"other":1})");

    // b's hook, by poll(): one change from the last state it saw to its initial state.
    CHECK_EQ(b.poll(), std::size_t(1));
    CHECK_EQ(b_seen.size(), std::size_t(1));
    if (b_seen.size() == 1) {
        CHECK_EQ(b_seen[0], (VersionedDelivery{0, R"({"init":true,"n":3})", R"({"mine":1})", std::nullopt}));
    }
    CHECK_EQ(b.poll(), std::size_t(0));

    // Versions never go back: a compare-and-set against a pre-deletion version fails, before
    // and after the agent is written again.
    CHECK_ERROR(a.set_state_if(last, R"({"stale":1})"), Status::conflict);
    const auto again = a.set_state_if(0, R"({"again":1})");  // 0: nothing stored
    CHECK_EQ(again.version, last + 1);  // the version after the one it was deleted at
    CHECK_EQ(a_seen.size(), std::size_t(2));  // the deletion ahead of a's write, then the write
    if (a_seen.size() == 2) {
        CHECK_EQ(a_seen[0], (VersionedDelivery{0, R"({"init":true,"n":3})", R"({"init":true})", std::nullopt}));
        CHECK_EQ(a_seen[1], (VersionedDelivery{again.version, R"({"init":true})",
                                               R"({"init":true,"again":1})", std::string(R"({"again":1})")}));
    }
    for (std::uint64_t old = first; old <= last; ++old) {
        CHECK_ERROR(a.set_state_if(old, R"({"stale":1})"), Status::conflict);
        CHECK_ERROR(b.replace_state_if(old, R"({"stale":1})"), Status::conflict);
    }
    CHECK_ERROR(agent_state::delete_agent(store.path, id, Options(), last), Status::conflict);
    CHECK_EQ(agent_state::delete_agent(store.path, id).value_or(0), std::uint64_t(again.version));

    // Nothing stored: std::nullopt, not an error; if_version 0 matches it, others conflict.
    CHECK(!agent_state::delete_agent(store.path, id));
    CHECK(!agent_state::delete_agent(store.path, store.prefix + "never-written"));
    CHECK(!agent_state::delete_agent(store.path, store.prefix + "never-written", Options(), 0));
    CHECK_ERROR(agent_state::delete_agent(store.path, store.prefix + "never-written", Options(), 1),
                Status::conflict);
    CHECK_ERROR(agent_state::delete_agent(store.path, std::string("a\0b", 3)), Status::invalid_argument);
    CHECK_ERROR(agent_state::delete_agent(store.path, std::string(256, 'x')), Status::invalid_argument);
    CHECK_ERROR(agent_state::delete_agent(store.path, id, Options(), std::uint64_t(1) << 63),
                Status::invalid_argument);
    Options read_only;
    read_only.read_only = true;
    CHECK_ERROR(agent_state::delete_agent(store.path, store.prefix + "other", read_only), Status::storage);
    CHECK_EQ(other.get_state(), R"({"other":1})");
}

// On SQLite, no byte of a deleted state or of its history is left in the file or its WAL.
SQLITE_ONLY_TEST(delete_agent_erases_the_state_and_its_history, "the bytes of the database file") {
    Store store;
    const std::string in_state = "marker-in-state-9a8b7c", in_history = "marker-in-history-6d5e4f";
    Agent a = store.open("victim", with_log(agent_state::ChangeLog::last(100)));
    Agent bystander = store.open("bystander");
    bystander.set_state(R"({"keep":"me"})");
    a.set_state("{\"h\":\"" + in_history + "\"}");
    a.set_state("{\"h\":null,\"s\":\"" + in_state + "\"}");
    auto found = [&](const std::string &marker) {
        return contains(read_file(store.path), marker) || contains(read_file(store.path + "-wal"), marker);
    };
    CHECK(found(in_state));
    CHECK(found(in_history));
    CHECK(agent_state::delete_agent(store.path, store.prefix + "victim").has_value());
    CHECK(!found(in_state));
    CHECK(!found(in_history));
    CHECK_EQ(a.get_state(), "{}");
    CHECK_EQ(bystander.get_state(), R"({"keep":"me"})");
}

// Expiry: the agents idle for longer than the duration go, the longest idle first, at most
// `limit` a call; a dry run returns the same and deletes nothing; a recent agent stays.
TEST(expire_agents_longest_idle_first_in_batches_and_dry_run) {
    Store store;
    Options initial;
    initial.initial_state = R"({"gone":true})";
    std::map<std::string, Agent> agents;
    for (const char *name : {"old2", "old0", "fresh", "old1"}) {
        agents.emplace(name, store.open(name, initial));
        agents.at(name).set_state("{\"name\":\"" + std::string(name) + "\"}");
    }
    CHECK_ERROR(agent_state::expire_agents(store.path, std::chrono::milliseconds(-1)), Status::invalid_argument);
    CHECK_ERROR(agent_state::expire_agents(store.path, std::chrono::hours(1), Options(), 0), Status::invalid_argument);
    CHECK_ERROR(agent_state::expire_agents(store.path, std::chrono::hours(1), Options(),
                                           agent_state::max_list_limit + 1),
                Status::invalid_argument);
    if (!g_pg) {  // a private file (on the server, other tests' agents would go)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // written more than 0 ms ago
        CHECK_EQ(agent_state::expire_agents(store.path, std::chrono::milliseconds(0), Options(), 100, true).size(),
                 std::size_t(4));
        CHECK(agent_state::expire_agents(store.path, std::chrono::hours(24)).empty());
        CHECK_EQ(store.list(), "fresh old0 old1 old2");
    }

    // Aged to January 1970, a minute apart, old0 the longest idle.
    const std::int64_t base = 10LL * 86400000;
    const std::vector<std::pair<std::string, std::int64_t>> written = {
        {store.prefix + "old0", base}, {store.prefix + "old1", base + 60000}, {store.prefix + "old2", base + 120000}};
    if (!age_agents(store, written)) return;
    const auto idle = std::chrono::milliseconds(now_ms() - (base + 240000));

    const auto dry = agent_state::expire_agents(store.path, idle, Options(), 2, true);
    CHECK_EQ(store.names(dry), "old0 old1");
    for (std::size_t k = 0; k < dry.size(); ++k) {
        CHECK_EQ(dry[k].written_at_ms, written[k].second);
        CHECK(dry[k].version > 0);
        CHECK(dry[k].bytes > 0);
    }
    CHECK_EQ(store.list(), "fresh old0 old1 old2");

    const auto gone = agent_state::expire_agents(store.path, idle, Options(), 2);
    CHECK_EQ(store.names(gone), "old0 old1");
    CHECK(gone == dry);
    CHECK_EQ(store.list(), "fresh old2");
    CHECK_EQ(agents.at("old0").get_state_versioned().state, R"({"gone":true})");
    CHECK_EQ(agents.at("old0").get_state_versioned().version, std::uint64_t(0));
    CHECK_EQ(store.names(agent_state::expire_agents(store.path, idle, Options(), 2)), "old2");
    CHECK(agent_state::expire_agents(store.path, idle, Options(), 2).empty());
    CHECK_EQ(store.list(), "fresh");
    CHECK_EQ(agents.at("fresh").get_state(), R"({"gone":true,"name":"fresh"})");
}

// The store functions honour this thread's Cancel::Scope: a deletion waiting for the lock a
// write in progress holds (the file's write lock on SQLite, the agent's row on PostgreSQL) is
// ended by the token's deadline, and deletes nothing.
TEST(delete_agent_waiting_for_a_lock_is_ended_by_a_cancel_token) {
    Store store;
    Agent victim = store.open("locked");
    victim.set_state(R"({"n":1})");
    Agent holder = store.open("locked");
    std::promise<void> inside, release;
    std::shared_future<void> released = release.get_future().share();
    std::atomic<bool> entered{false};
    holder.set_validator([&](const agent_state::Change &) {
        if (!entered.exchange(true)) {
            inside.set_value();
            released.wait();
        }
    });
    std::exception_ptr holder_error;
    std::thread writer([&] {
        try {
            Cancel never;  // a write under a token takes the row lock first on PostgreSQL
            Cancel::Scope scope(never);
            holder.set_state(R"({"holder":1})");
        } catch (...) {
            holder_error = std::current_exception();
        }
    });
    if (inside.get_future().wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
        fail(__FILE__, __LINE__, "the holder's write never reached its validator");
        release.set_value();
        writer.join();
        return;
    }
    Options wait;
    wait.busy_timeout_ms = 30000;
    const auto start = std::chrono::steady_clock::now();
    {
        Cancel deadline(std::chrono::milliseconds(300));
        Cancel::Scope scope(deadline);
        CHECK_ERROR(agent_state::delete_agent(store.path, store.prefix + "locked", wait), Status::cancelled);
    }
    const auto elapsed = std::chrono::steady_clock::now() - start;
    CHECK(elapsed >= std::chrono::milliseconds(150));
    CHECK(elapsed <= std::chrono::seconds(5));
    release.set_value();
    writer.join();
    CHECK(!holder_error);
    const auto after = victim.get_state_versioned();
    CHECK_EQ(after.state, R"({"n":1,"holder":1})");
    CHECK_EQ(after.version, std::uint64_t(2));
    CHECK_EQ(agent_state::delete_agent(store.path, store.prefix + "locked", Options(), 2).value_or(0),
             std::uint64_t(2));
}

// The reader of the library's list: members in any order, whitespace, escapes, unknown
// members skipped; anything else is Status::json.
TEST(the_list_reader_reads_the_fixed_shape_only) {
    using agent_state::detail::parse_agent_infos;
    CHECK(parse_agent_infos("[]", "t").empty());
    const auto infos = parse_agent_infos(
        " [ {\"written_at\" : -5, \"new\": {\"x\":[1,\"]\",{}]}, \"bytes\":7,\"version\":18446744073709551615,"
        "\"id\":\"a\\\"\\\\\\/\\u00e9\\ud83d\\ude00\\n\"} , {\"id\":\"\",\"version\":1,\"bytes\":0,"
        "\"written_at\":1700000000000,\"flag\":true} ] ",
        "t");
    CHECK_EQ(infos.size(), std::size_t(2));
    if (infos.size() == 2) {
        CHECK_EQ(infos[0].id, "a\"\\/\xc3\xa9\xf0\x9f\x98\x80\n");
        CHECK_EQ(infos[0].version, UINT64_MAX);
        CHECK_EQ(infos[0].bytes, std::uint64_t(7));
        CHECK_EQ(infos[0].written_at_ms, std::int64_t(-5));
        CHECK_EQ(infos[1].id, "");
        CHECK_EQ(infos[1].written_at_ms, std::int64_t(1700000000000));
    }
    for (const char *bad : {"", "{}", "[", "[{}]", "[1]", "[{\"id\":\"a\",\"version\":1,\"bytes\":1}]",
                            "[{\"id\":\"a\",\"version\":1.5,\"bytes\":1,\"written_at\":0}]",
                            "[{\"id\":\"a\",\"version\":-1,\"bytes\":1,\"written_at\":0}]",
                            "[{\"id\":\"a\",\"version\":18446744073709551616,\"bytes\":1,\"written_at\":0}]",
                            "[{\"id\":\"\\ud800\",\"version\":1,\"bytes\":1,\"written_at\":0}]",
                            "[{\"id\":\"a\",\"version\":1,\"bytes\":1,\"written_at\":0}] x",
                            "[{\"id\":\"a\" \"version\":1,\"bytes\":1,\"written_at\":0}]"}) {
        const Error e = CATCH_ERROR(parse_agent_infos(bad, "t"));
        CHECK_EQ(status_text(e.status()), status_text(Status::json));
    }
}
