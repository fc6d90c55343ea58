// The C++ wrapper's tests (tests/cpp/main.cpp runs them): on_state_changed hooks, their
// exceptions (also from second_tu.cpp, another translation unit), Subscription.

#include "harness.hpp"

TEST_FILE(3);

// Defined in second_tu.cpp.
namespace second_tu {
struct Failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};
agent_state::HookId register_throwing_hook(agent_state::Agent &agent);
void set_throwing_validator(agent_state::Agent &agent);
std::string write_from_second_tu(agent_state::Agent &agent, std::string_view patch);
}  // namespace second_tu

// ---------------------------------------------------------------------------------------------
// on_state_changed hooks.

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

namespace {
// Whether Agent::on_state_changed accepts a callable of type F (it must not compile otherwise).
template <class F, class = void>
struct registers : std::false_type {};
template <class F>
struct registers<F, std::void_t<decltype(std::declval<Agent &>().on_state_changed(
                        std::declval<F>()))>> : std::true_type {};
}  // namespace

TEST(hooks_of_the_reference_shape_next_prev) {
    auto two = [](std::string_view, std::string_view) {};
    auto three = [](std::string_view, std::string_view, std::optional<std::string_view>) {};
    auto one = [](std::string_view) {};
    auto four = [](std::string_view, std::string_view, std::string_view, int) {};
    static_assert(registers<decltype(two)>::value, "fn(next, prev) is a hook");
    static_assert(registers<decltype(three)>::value, "fn(next, prev, patch) is a hook");
    static_assert(!registers<decltype(one)>::value, "fn(next) is refused at compile time");
    static_assert(!registers<decltype(four)>::value, "fn of four arguments is refused");
    Options options;
    options.initial_state = R"({"status":"idle"})";
    Agent agent = open_store(":memory:", options);
    std::vector<std::pair<std::string, std::string>> seen;
    agent.on_state_changed([&](std::string_view next, std::string_view prev) {
        seen.emplace_back(std::string(next), std::string(prev));
    });
    {
        auto sub = agent.subscribe([&](std::string_view, std::string_view) {});
    }
    agent.set_state(R"({"status":"processing"})");
    CHECK_EQ(seen.size(), 1u);
    if (seen.size() == 1) {
        CHECK_EQ(seen[0].first, R"({"status":"processing"})");
        CHECK_EQ(seen[0].second, R"({"status":"idle"})");
    }
}
