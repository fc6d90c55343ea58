// The C++ runner of the public RFC 6902 suite (tests/conformance/json_patch/cases.py writes the
// cases from ../shared/corpora/json-patch-tests), through the C++ wrapper: each case on a fresh
// Agent.
//
//     json_patch_cases CASES_JSON RESULTS_DIR
//
// For each case: replace_state(state), then patch_state(patch), with the case's text passed
// untouched. A case with "expect" must apply, return what the store then holds, and pass the
// case's "verify" patch (a `test` of the whole state against "expect": the library's own JSON
// equality), which must commit nothing. A case with "error" must throw Error with
// Status::invalid_argument, path, test_failed or codec, the state and its version unchanged.
//
// Writes RESULTS_DIR/cpp-BACKEND.txt (BACKEND: AGENT_STATE_TEST_BACKEND, sqlite or postgres),
// one line per case, "ID STATUS" (the C name of the status), which compare.py checks against
// every other language's run. Prints a line per failed case and a last line "N passed, M
// failed" (cases). Without CASES_JSON (no corpus beside the checkout to make it from) it says
// it skipped, and fails under CI=true. tests/cpp/run.sh builds and runs it.

#include "agent_state.hpp"

extern "C" {
#include "json_reader.h"
#include "vector_text.h"
}

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

namespace fs = std::filesystem;
using agent_state::Agent;
using agent_state::Error;
using agent_state::Status;

namespace {

// A case's failure: the reason, for the FAIL line.
struct CaseFailed : std::runtime_error {
    using std::runtime_error::runtime_error;
};

std::string text_of(const JrNode *node) { return std::string(node->str, node->str_len); }

// Runs one case on `agent`: `status` receives the C name of patch_state's status; throws
// CaseFailed when the case fails.
void run_case(Agent &agent, const JrNode *c, std::string &status) {
    const std::string state = text_of(jr_get(c, "state"));
    const std::string patch = text_of(jr_get(c, "patch"));
    const JrNode *expect = jr_get(c, "expect");
    const bool error = jr_get(c, "error") != nullptr;
    agent.replace_state(state);
    const agent_state::Versioned before = agent.get_state_versioned();
    std::string result;
    try {
        result = agent.patch_state(patch);
        status = "AGENT_OK";
    } catch (const Error &e) {
        status = e.name();
        if (!error) throw CaseFailed(std::string("refused: ") + e.what());
        const Status s = e.status();
        if (s != Status::invalid_argument && s != Status::path && s != Status::test_failed &&
            s != Status::codec) {
            throw CaseFailed(std::string("refused with another status: ") + e.what());
        }
        const agent_state::Versioned after = agent.get_state_versioned();
        if (after.state != before.state || after.version != before.version) {
            throw CaseFailed("refused, but the state became " + after.state);
        }
        return;
    }
    if (error) throw CaseFailed("applied as " + result + ", expected an error");
    const agent_state::Versioned after = agent.get_state_versioned();
    if (after.state != result) {
        throw CaseFailed("the store holds " + after.state + ", not what patch_state returned");
    }
    if (expect != nullptr) {
        try {
            agent.patch_state(text_of(jr_get(c, "verify")));
        } catch (const Error &e) {
            throw CaseFailed(std::string("the result is not the expected one: ") + e.what());
        }
        if (agent.get_state_versioned().version != after.version) {
            throw CaseFailed("the verifying test committed a change");
        }
    }
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 3) {
        std::cerr << "usage: json_patch_cases CASES_JSON RESULTS_DIR\n";
        return 2;
    }
    char why[256] = "";
    const char *pg_uri = nullptr;
    const char *backend = vt_backend(&pg_uri, why, sizeof why);
    if (backend == nullptr) {
        std::cerr << "json_patch_cases: " << why << "\n";
        return 2;
    }
    std::size_t len = 0;
    std::unique_ptr<char, void (*)(void *)> text(jr_read_file(argv[1], &len), std::free);
    if (!text) {
        const char *ci = std::getenv("CI");
        const bool under_ci = ci != nullptr && std::strcmp(ci, "true") == 0;
        std::cout << "json_patch_cases: no RFC 6902 cases at " << argv[1]
                  << " (tests/conformance/json_patch/cases.py makes them from "
                     "../shared/corpora/json-patch-tests): "
                  << (under_ci ? "a failure under CI=true" : "skipped") << "\n0 passed, "
                  << (under_ci ? 1 : 0) << " failed\n";
        return under_ci ? 1 : 0;
    }
    char err[256] = "";
    std::unique_ptr<JrNode, void (*)(JrNode *)> root(jr_parse(text.get(), len, err, sizeof err),
                                                     jr_free);
    const JrNode *cases = jr_get(root.get(), "cases");
    if (cases == nullptr || cases->kind != JR_ARRAY) {
        std::cerr << "json_patch_cases: " << argv[1] << " is not a file of cases: " << err << "\n";
        return 2;
    }
    // One store for the run: a SQLite file in a fresh directory, or the server.
    fs::path dir;
    std::string path;
    if (std::strcmp(backend, "postgres") == 0) {
        path = pg_uri;
    } else {
        char tmpl[] = "/tmp/agent_state_json_patch_cpp_XXXXXX";
        if (mkdtemp(tmpl) == nullptr) {
            std::perror("mkdtemp");
            return 2;
        }
        dir = tmpl;
        path = (dir / "cases.db").string();
    }
    const fs::path out_path = fs::path(argv[2]) / (std::string("cpp-") + backend + ".txt");
    std::error_code ec;
    fs::create_directories(argv[2], ec);
    std::ofstream results(out_path);
    if (!results) {
        std::cerr << "json_patch_cases: cannot write " << out_path.string() << "\n";
        return 2;
    }
    std::cout << "agent_state " << agent_state::version() << ": the RFC 6902 suite's " << cases->n
              << " cases through the C++ wrapper on " << backend << "\n";
    int passed = 0, failed = 0;
    for (std::size_t i = 0; i < cases->n; ++i) {
        const JrNode *c = cases->items[i];
        const std::string id = text_of(jr_get(c, "id"));
        std::string status = "AGENT_ERR_UNKNOWN";
        // A fresh agent per case: its own agent_id in the run's one store (on PostgreSQL,
        // unique among runs and runners sharing the server).
        char agent_id[128];
        vt_agent_id("cpppatch", agent_id, sizeof agent_id);
        try {
            Agent agent = Agent::open(path, std::string(R"({"agent_id":")") + agent_id + "\"}");
            run_case(agent, c, status);
            agent.close();
            ++passed;
        } catch (const std::exception &e) {
            std::cout << "FAIL " << id << ": " << e.what() << "\n";
            ++failed;
        }
        results << id << " " << status << "\n";
    }
    results.close();
    if (!results) {
        std::cerr << "json_patch_cases: cannot write " << out_path.string() << "\n";
        ++failed;
    }
    if (!dir.empty()) fs::remove_all(dir, ec);
    std::cout << "wrote " << out_path.string() << "\n" << passed << " passed, " << failed << " failed\n";
    return failed == 0 ? 0 : 1;
}
