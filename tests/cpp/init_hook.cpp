// The C++ wrapper's tests (tests/cpp/main.cpp runs them): the initial-state hook.

#include "harness.hpp"

TEST_FILE(4);

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
