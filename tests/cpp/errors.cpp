// The C++ wrapper's tests (tests/cpp/main.cpp runs them): error paths. agent_state::Error
// and the status of each failure.

#include "harness.hpp"

TEST_FILE(2);

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
// Cancelling a call.

TEST(a_call_under_a_fired_cancel_token_throws_cancelled_and_writes_nothing) {
    Agent agent = open_store(path_in_dir("cancel.db"));
    agent.set_state(R"({"a":1})");
    Cancel token;
    token.cancel();
    {
        Cancel::Scope scope(token);
        CHECK_ERROR(agent.set_state(R"({"a":2})"), Status::cancelled);
        CHECK_ERROR(agent.get_state(), Status::cancelled);
    }
    // Outside the scope the thread's calls are not cancelled.
    CHECK_EQ(agent.get_state(), R"({"a":1})");
    // A deadline already due, and a token that never fires.
    Cancel due(std::chrono::milliseconds(0));
    {
        Cancel::Scope scope(due);
        CHECK_ERROR(agent.replace_state(R"({"b":1})"), Status::cancelled);
    }
    Cancel later(std::chrono::milliseconds(3600000));
    {
        Cancel::Scope scope(later);
        CHECK_EQ(agent.set_state(R"({"c":3})"), R"({"a":1,"c":3})");
    }
    Cancel moved = std::move(later);
    moved.cancel();
    CHECK(later.raw() == 0);
}
