// The C++ runner of the cross-language conformance vectors (tests/conformance/README.md),
// through the C++ wrapper (bindings/cpp/agent_state.hpp): Options, Agent, on_change,
// set_validator, exceptions. tests/cpp/run.sh builds it and runs it on every vector file (also
// under valgrind and the sanitizers); the last line is "N passed, M failed" (vectors).
//
// The vector files are read with the C runners' reader (tests/conformance/json_reader.h), which
// keeps each value's exact text: inputs go to the library as the vectors wrote them and outputs
// are compared byte for byte.

#include "agent_state.hpp"

extern "C" {
#include "json_reader.h"
#include "vector_text.h"
}

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using agent_state::Agent;
using agent_state::Error;
using agent_state::Options;

namespace {

// A vector's failure: the reason, for the FAIL line.
struct Mismatch : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// What the recording hook throws when the vector says it fails; the wrapper rethrows it from
// the write, so this runner counts it as AGENT_ERR_HOOK.
struct HookFailure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Tree {
    JrNode *root = nullptr;
    Tree() = default;
    Tree(const Tree &) = delete;
    Tree &operator=(const Tree &) = delete;
    ~Tree() { jr_free(root); }
};

std::string str(const JrNode *node) { return node ? std::string(node->str, node->str_len) : ""; }

std::string take(char *text, size_t len) {
    std::unique_ptr<char, decltype(&std::free)> owned(text, &std::free);
    return text ? std::string(text, len) : std::string();
}

// The compact text of a vector value (its exact text without the whitespace between tokens).
std::string compact(const JrNode *node) {
    size_t len = 0;
    char *text = jr_compact(node, &len);
    return take(text, len);
}

std::optional<std::string> expected(const JrNode *obj, const char *field) {
    size_t len = 0;
    char *text = vt_expected(obj, field, &len);
    if (text == nullptr) {
        return std::nullopt;
    }
    return take(text, len);
}

bool has_member(std::string_view json, const std::string &name) {
    char err[128];
    Tree tree;
    tree.root = jr_parse(json.data(), json.size(), err, sizeof err);
    return jr_get(tree.root, name.c_str()) != nullptr;
}

// ---- the store location: one helper, so that another backend can be plugged in ----------

fs::path &temp_dir() {
    static fs::path dir;
    return dir;
}

// The backend of this run (vt_backend: AGENT_STATE_TEST_BACKEND, AGENT_STATE_TEST_PG_URI).
struct Backend {
    const char *name = nullptr;  // "sqlite" or "postgres"
    const char *pg_uri = nullptr;
};

Backend &backend() {
    static Backend b;
    return b;
}

// Where a vector's store lives: a fresh SQLite file in this run's temporary directory, or (on
// PostgreSQL) the server's URI with a fresh agent_id, which every open of the vector adds to
// its options.
struct StoreLocation {
    std::string path, agent_id;
};

StoreLocation store_location() {
    static unsigned counter = 0;
    if (std::strcmp(backend().name, "postgres") == 0) {
        char id[128];
        vt_agent_id("cpp", id, sizeof id);
        return {backend().pg_uri, id};
    }
    const std::string id = "cpp" + std::to_string(getpid()) + "_" + std::to_string(++counter);
    if (temp_dir().empty()) {
        std::string pattern = (fs::temp_directory_path() / "agent_state_conformance_XXXXXX").string();
        if (mkdtemp(pattern.data()) == nullptr) {
            throw Mismatch("mkdtemp failed");
        }
        temp_dir() = pattern;
    }
    return {(temp_dir() / (id + ".db")).string(), ""};
}

// ---- one vector ----------------------------------------------------------------------------

struct Event {
    std::string next, prev, patch;
    std::uint64_t version;
};

class VectorRun {
public:
    explicit VectorRun(const JrNode *vector) : vector_(vector) {
        if (const JrNode *f = jr_get(vector, "hook_fails_when")) {
            fail_when_ = str(f);
        }
        if (const JrNode *v = jr_get(vector, "validator_rejects")) {
            reject_when_ = str(v);
        }
    }

    void run() {
        StoreLocation where = store_location();
        path_ = where.path;
        agent_id_ = where.agent_id;
        const JrNode *open_status = jr_get(vector_, "open_status");
        std::string name = "AGENT_OK", message;
        try {
            open(jr_get(vector_, "open"));
        } catch (const Error &e) {
            name = e.name();
            message = e.what();
        }
        check_status("open", open_status ? str(open_status) : "AGENT_OK",
                     str(jr_get(vector_, "open_message")), name, message);
        if (open_status != nullptr) {
            return;
        }
        const JrNode *ops = jr_get(vector_, "ops");
        for (size_t k = 0; ops != nullptr && k < ops->n; ++k) {
            try {
                run_op(ops->items[k]);
            } catch (const Mismatch &m) {
                throw Mismatch("op " + std::to_string(k + 1) + ": " + m.what());
            }
        }
    }

    void cleanup() noexcept {
        agent_ = Agent();
        if (!temp_dir().empty() && path_.rfind(temp_dir().string(), 0) == 0) {
            std::error_code ignored;
            for (const char *suffix : {"", "-wal", "-shm"}) {
                fs::remove(path_ + suffix, ignored);
            }
        }
    }

private:
    // Opens with the vector's options: through agent_state::Options when every option maps to
    // one of its members, else as the raw options JSON (values Options cannot hold, such as a
    // negative number or an unknown key, which the library must refuse).
    void open(const JrNode *options) {
        agent_ = Agent();
        std::optional<Options> typed = to_options(options);
        if (!agent_id_.empty()) {
            // PostgreSQL: the options' JSON (Options::to_json when they map to it) with the
            // vector's agent_id added.
            const std::string json = typed ? typed->to_json() : compact(options);
            std::unique_ptr<char, decltype(&std::free)> with_id(
                vt_with_agent_id(json.c_str(), agent_id_.c_str()), &std::free);
            if (!with_id) {
                throw Mismatch("out of memory");
            }
            agent_ = Agent::open(path_, std::string(with_id.get()));
        } else if (typed) {
            agent_ = Agent::open(path_, *typed);
        } else {
            agent_ = Agent::open(path_, compact(options));
        }
        if (jr_get(vector_, "hooks") != nullptr || !fail_when_.empty()) {
            agent_.on_change([this](const agent_state::Change &c) {
                events_.push_back({std::string(c.next), std::string(c.prev),
                                   c.patch ? std::string(*c.patch) : std::string("null"),
                                   c.version});
                if (!fail_when_.empty() && has_member(c.next, fail_when_)) {
                    throw HookFailure("the hook fails on the member " + fail_when_);
                }
            });
        }
        if (!reject_when_.empty()) {
            agent_.set_validator([this](const agent_state::Change &c) {
                if (has_member(c.next, reject_when_)) {
                    throw std::runtime_error("the state may not have the member " + reject_when_);
                }
            });
        }
    }

    static std::optional<std::uint64_t> whole(const JrNode *v) {
        if (v->kind != JR_NUMBER || v->raw[0] == '-' ||
            std::string_view(v->raw, v->raw_len).find_first_of(".eE") != std::string_view::npos) {
            return std::nullopt;
        }
        return std::strtoull(v->raw, nullptr, 10);
    }

    static std::optional<Options> to_options(const JrNode *options) {
        Options o;
        for (size_t k = 0; options != nullptr && k < options->n; ++k) {
            const std::string key = options->keys[k];
            const JrNode *v = options->items[k];
            if (key == "initial_state") {
                o.initial_state = compact(v);
            } else if (key == "max_value_bytes" && whole(v)) {
                o.max_value_bytes = whole(v);
            } else if (key == "busy_timeout_ms" && whole(v)) {
                o.busy_timeout_ms = whole(v);
            } else if (key == "server_timeout_ms" && whole(v)) {
                o.server_timeout_ms = whole(v);
            } else if (key == "synchronous" && (str(v) == "full" || str(v) == "normal")) {
                o.synchronous = str(v) == "full" ? agent_state::Synchronous::full
                                                 : agent_state::Synchronous::normal;
            } else if (key == "read_only" && v->kind == JR_BOOL) {
                o.read_only = v->truth != 0;
            } else if (key == "change_log" && v->kind == JR_OBJECT) {
                agent_state::ChangeLog log;
                if (const JrNode *n = jr_get(v, "keep_last"); n && whole(n)) {
                    log.keep_last = whole(n);
                }
                if (const JrNode *n = jr_get(v, "keep_seconds"); n && whole(n)) {
                    log.keep_seconds = whole(n);
                }
                o.change_log = log;
            } else {
                return std::nullopt;
            }
        }
        return o;
    }

    static void check_status(const std::string &what, const std::string &want,
                             const std::string &want_part, const std::string &got,
                             const std::string &message) {
        if (got != want) {
            throw Mismatch(what + ": got " + got + " (" + message + "), want " + want);
        }
        if (got != "AGENT_OK" && !want_part.empty() && message.find(want_part) == std::string::npos) {
            throw Mismatch(what + ": message \"" + message + "\" does not contain \"" + want_part + "\"");
        }
    }

    static void check_text(const std::string &what, const JrNode *obj, const char *field,
                           const std::string &actual) {
        const bool present = jr_get(obj, field) != nullptr ||
                             jr_get(obj, (std::string(field) + "_text").c_str()) != nullptr;
        if (!present) {
            return;
        }
        std::optional<std::string> want = expected(obj, field);
        if (!want || *want != actual) {
            throw Mismatch(what + ": got " + actual.substr(0, 400) + ", want " +
                           (want ? want->substr(0, 400) : "(unreadable expectation)"));
        }
    }

    static void check_version(const JrNode *want, std::uint64_t got) {
        if (want != nullptr && std::strtoull(want->raw, nullptr, 10) != got) {
            throw Mismatch("version " + std::to_string(got) + ", want " +
                           std::string(want->raw, want->raw_len));
        }
    }

    void check_events(const JrNode *want) {
        if (want == nullptr || want->kind != JR_ARRAY) {
            throw Mismatch("events op without an \"events\" array");
        }
        if (want->n != events_.size()) {
            throw Mismatch(std::to_string(events_.size()) + " deliveries, want " + std::to_string(want->n));
        }
        for (size_t k = 0; k < want->n; ++k) {
            const std::string label = "delivery " + std::to_string(k + 1) + " ";
            check_text(label + "next", want->items[k], "next", events_[k].next);
            check_text(label + "prev", want->items[k], "prev", events_[k].prev);
            check_text(label + "patch", want->items[k], "patch", events_[k].patch);
            check_version(jr_get(want->items[k], "version"), events_[k].version);
        }
        events_.clear();
    }

    void run_op(const JrNode *op) {
        const std::string kind = str(jr_get(op, "op"));
        if (kind == "events") {
            check_events(jr_get(op, "events"));
            return;
        }
        const JrNode *want_status = jr_get(op, "status");
        const std::string want = want_status ? str(want_status) : "AGENT_OK";
        const std::string part = str(jr_get(op, "message"));
        std::string got = "AGENT_OK", message, state;
        std::optional<std::uint64_t> version;
        try {
            if (kind == "reopen") {
                const JrNode *options = jr_get(op, "open");
                open(options ? options : jr_get(vector_, "open"));
            } else if (kind == "get") {
                const auto v = agent_.get_state_versioned();
                state = v.state;
                version = v.version;
            } else {
                size_t len = 0;
                char *raw = vt_input(op, &len);
                if (raw == nullptr) {
                    throw Mismatch("op " + kind + " has no input");
                }
                const std::string input = take(raw, len);  // len is set by now
                const JrNode *if_version = jr_get(op, "if_version");
                const std::uint64_t expected_version = if_version ? std::strtoull(if_version->raw, nullptr, 10) : 0;
                if (kind == "set") {
                    state = agent_.set_state(input);
                } else if (kind == "replace") {
                    state = agent_.replace_state(input);
                } else if (kind == "set_if" || kind == "replace_if") {
                    const auto v = kind == "set_if" ? agent_.set_state_if(expected_version, input)
                                                    : agent_.replace_state_if(expected_version, input);
                    state = v.state;
                    version = v.version;
                } else if (kind == "patch") {
                    state = agent_.patch_state(input);
                } else if (kind == "patch_if") {
                    const auto v = agent_.patch_state_if(expected_version, input);
                    state = v.state;
                    version = v.version;
                } else {
                    throw Mismatch("unknown op " + kind);
                }
            }
        } catch (const Error &e) {
            got = e.name();
            message = e.what();
        } catch (const HookFailure &e) {
            got = "AGENT_ERR_HOOK";
            message = e.what();
        }
        check_status(kind, want, part, got, message);
        if (got == "AGENT_OK" && kind != "reopen") {
            check_text("state", op, "expect", state);
        }
        if (jr_get(op, "version") != nullptr) {
            check_version(jr_get(op, "version"), version ? *version : agent_.get_state_versioned().version);
        }
    }

    const JrNode *vector_;
    std::string path_, agent_id_, fail_when_, reject_when_;
    Agent agent_;
    std::vector<Event> events_;
};

}  // namespace

int main(int argc, char **argv) {
    int passed = 0, failed = 0, skipped = 0;
    char why[200];
    backend().name = vt_backend(&backend().pg_uri, why, sizeof why);
    if (backend().name == nullptr) {
        std::fprintf(stderr, "conformance_cpp: %s\n", why);
        return 2;
    }
    std::printf("agent_state %s conformance vectors, C++ runner, backend %s\n", agent_version(),
                backend().name);
    for (int i = 1; i < argc; ++i) {
        size_t len = 0;
        char err[256] = "no file";
        std::unique_ptr<char, decltype(&std::free)> text(jr_read_file(argv[i], &len), &std::free);
        Tree file;
        file.root = text ? jr_parse(text.get(), len, err, sizeof err) : nullptr;
        const JrNode *vectors = jr_get(file.root, "vectors");
        if (vectors == nullptr) {
            std::printf("FAIL %s: cannot read the vectors (%s)\n", argv[i], err);
            ++failed;
            continue;
        }
        for (size_t k = 0; k < vectors->n; ++k) {
            const std::string name = str(jr_get(vectors->items[k], "name"));
            if (!vt_runs_here(vectors->items[k], "cpp") ||
                !vt_backend_ok(vectors->items[k], backend().name)) {
                std::printf("skip %s: %s\n", argv[i], name.c_str());
                ++skipped;
                continue;
            }
            VectorRun run(vectors->items[k]);
            try {
                run.run();
                std::printf("ok   %s: %s\n", argv[i], name.c_str());
                ++passed;
            } catch (const std::exception &e) {
                std::printf("FAIL %s: %s: %s\n", argv[i], name.c_str(), e.what());
                ++failed;
            }
            run.cleanup();
        }
    }
    if (!temp_dir().empty()) {
        std::error_code ignored;
        fs::remove(temp_dir(), ignored);
    }
    std::printf("%d skipped (restricted to other runners or backends)\n", skipped);
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
