// The C++ wrapper's tests (tests/cpp/main.cpp runs them): compile-time properties and
// move semantics.

#include "harness.hpp"

TEST_FILE(7);

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
