// The C++ wrapper's tests (tests/cpp/main.cpp runs them): the validator, on_change, poll,
// changes_since, state_at and restore, calls on a closed agent.

#include "harness.hpp"

TEST_FILE(6);

// ---------------------------------------------------------------------------------------------
// The validator and the change log (versions and compare-and-set in versions.cpp).

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
             R"([{"version":4,"at":0,"kind":"merge","schema":0,"migrated_from":null,"patch":{"n":4},"next":{"init":true,"n":4}},)"
             R"({"version":5,"at":0,"kind":"merge","schema":0,"migrated_from":null,"patch":{"n":5},"next":{"init":true,"n":5}}])");
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
