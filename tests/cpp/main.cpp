// The C++ wrapper's tests (bindings/cpp/agent_state.hpp): main() runs every TEST of the test
// files, in the order of their TEST_FILE numbers (harness.hpp says how a test runs):
//   1 semantics.cpp   2 errors.cpp   3 hooks.cpp   4 init_hook.cpp   5 versions.cpp
//   6 change_log.cpp  7 moves.cpp    8 threads.cpp   9 agents.cpp   10 surface.cpp
//  11 schema.cpp     12 json_patch.cpp
// second_tu.cpp is a second translation unit including the wrapper (the ODR check).

#include "harness.hpp"

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
    // By file, and within a file in the order of registration (the order of definition).
    std::stable_sort(registry().begin(), registry().end(),
                     [](const TestCase &a, const TestCase &b) { return a.file < b.file; });
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
