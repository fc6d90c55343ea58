// The C++ wrapper's tests (tests/cpp/main.cpp runs them): threads.

#include "harness.hpp"

TEST_FILE(8);

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
                // Each write differs from every other (a write that changes nothing is no
                // change, and runs no hook).
                agent.replace_state((bad ? R"({"bad":)" : R"({"good":)") + std::to_string(i) + "}");
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
