// The C++ wrapper against the library's surface description (include/agent_state_surface.json,
// generated from the core's own definitions of its open options and statuses): Options has a
// member for every option, to_json() emits exactly the surface's option names, and Status has
// exactly the surface's statuses, numbers and names. The description is read from the checkout
// (../../include/ from this file), or from the file AGENT_STATE_SURFACE names (to try a changed
// one); without one (outside a checkout) the tests say so and check nothing.

#include "harness.hpp"

#include <cctype>
#include <map>
#include <set>
#include <utility>

#include "../conformance/json_reader.h"

TEST_FILE(10);

namespace {

// ---- The JSON reader of the conformance runners (tests/conformance/json_reader.c, linked in by
// run.sh), its trees owned ---------------------------------------------------------------------

struct Tree {
    std::string text;  // the tree's nodes point into it
    std::unique_ptr<JrNode, void (*)(JrNode *)> root{nullptr, jr_free};

    explicit Tree(std::string json) : text(std::move(json)) {
        char err[256] = "";
        root.reset(jr_parse(text.data(), text.size(), err, sizeof err));
        if (!root) throw std::runtime_error(std::string("not JSON: ") + err + ": " + text.substr(0, 80));
    }
};

// The member `key` of `obj`, which must be there.
const JrNode &member(const JrNode &obj, const char *key) {
    const JrNode *found = jr_get(&obj, key);
    if (found == nullptr) throw std::runtime_error(std::string("no member \"") + key + "\"");
    return *found;
}

std::string text_of(const JrNode &node) { return std::string(node.str, node.str_len); }

// The description, or nullopt (and a line saying so) when there is none.
std::optional<Tree> surface() {
    const char *env = std::getenv("AGENT_STATE_SURFACE");
    const fs::path path = env != nullptr && env[0] != 0
                              ? fs::path(env)
                              : fs::path(__FILE__).parent_path() / ".." / ".." / "include" /
                                    "agent_state_surface.json";
    if (!fs::exists(path)) {
        std::cout << "     (no surface description at " << path.string()
                  << ", not in a checkout of the repository: nothing checked)\n";
        return std::nullopt;
    }
    return Tree(read_file(path));
}

std::string joined(const std::set<std::string> &names) {
    std::string out;
    for (const auto &n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
}

// Each option's member of Options, set to a value to_json() sends. An option of the surface
// missing here needs its member in Options (and in to_json()), then a line here.
using Setter = void (*)(Options &);
const std::vector<std::pair<std::string, Setter>> &setters() {
    static const std::vector<std::pair<std::string, Setter>> all = {
        {"initial_state", [](Options &o) { o.initial_state = R"({"a":1})"; }},
        {"max_value_bytes", [](Options &o) { o.max_value_bytes = 1000; }},
        {"store_max_value_bytes", [](Options &o) { o.store_max_value_bytes = 1000; }},
        {"synchronous", [](Options &o) { o.synchronous = agent_state::Synchronous::normal; }},
        {"busy_timeout_ms", [](Options &o) { o.busy_timeout_ms = 100; }},
        {"server_timeout_ms", [](Options &o) { o.server_timeout_ms = 100; }},
        {"read_only", [](Options &o) { o.read_only = true; }},
        {"watch", [](Options &o) { o.watch = true; }},
        {"change_log", [](Options &o) { o.change_log = agent_state::ChangeLog::last(10); }},
        {"agent_id", [](Options &o) { o.agent_id = "a"; }},
        {"max_connections", [](Options &o) { o.max_connections = 2; }},
        {"schema_version", [](Options &o) { o.schema_version = 2; }},
        {"schema_steps", [](Options &o) { o.schema_steps = "[]"; }},
    };
    return all;
}

// The member names of the JSON object `text`.
std::set<std::string> keys_of(const std::string &text) {
    const Tree tree(text);
    std::set<std::string> keys;
    for (std::size_t i = 0; i < tree.root->n; ++i) keys.insert(tree.root->keys[i]);
    return keys;
}

}  // namespace

TEST(options_to_json_emits_exactly_the_surface_options) {
    const auto description = surface();
    if (!description) return;
    std::set<std::string> want;
    const JrNode &options = member(*description->root, "options");
    for (std::size_t i = 0; i < options.n; ++i) want.insert(text_of(member(*options.items[i], "name")));

    std::set<std::string> have;
    Options all;
    for (const auto &[name, set] : setters()) {
        Options one;
        set(one);
        CHECK_EQ(joined(keys_of(one.to_json())), name);  // each member emits its own option
        set(all);
        have.insert(name);
    }
    std::set<std::string> missing, extra;
    for (const auto &n : want) {
        if (have.count(n) == 0) missing.insert(n);
    }
    for (const auto &n : have) {
        if (want.count(n) == 0) extra.insert(n);
    }
    if (!missing.empty()) {
        fail(__FILE__, __LINE__, "the library's options " + joined(missing) +
                                     " have no member in agent_state::Options (add them, to "
                                     "to_json() and to setters() here)");
    }
    if (!extra.empty()) {
        fail(__FILE__, __LINE__, "options the library does not have: " + joined(extra));
    }
    // Every member set at once: exactly the surface's options; none set: none.
    CHECK_EQ(joined(keys_of(all.to_json())), joined(want));
    CHECK_EQ(Options().to_json(), std::string("{}"));
}

TEST(status_is_exactly_the_surface_statuses) {
    const auto description = surface();
    if (!description) return;
    // Every enumerator of Status, with its C name made from its own: bad_handle is
    // AGENT_ERR_BAD_HANDLE, ok AGENT_OK. A status of the surface missing here needs its
    // enumerator in Status, then a line here.
#define AGENT_STATE_STATUS(e) std::pair<Status, std::string>(Status::e, #e)
    const std::vector<std::pair<Status, std::string>> enumerators = {
        AGENT_STATE_STATUS(ok),          AGENT_STATE_STATUS(invalid_argument),
        AGENT_STATE_STATUS(bad_handle),  AGENT_STATE_STATUS(json),
        AGENT_STATE_STATUS(codec),       AGENT_STATE_STATUS(too_large),
        AGENT_STATE_STATUS(storage),     AGENT_STATE_STATUS(busy),
        AGENT_STATE_STATUS(hook),        AGENT_STATE_STATUS(conflict),
        AGENT_STATE_STATUS(rejected),    AGENT_STATE_STATUS(gap),
        AGENT_STATE_STATUS(unavailable), AGENT_STATE_STATUS(auth),
        AGENT_STATE_STATUS(cancelled),   AGENT_STATE_STATUS(newer_schema),
        AGENT_STATE_STATUS(migration),   AGENT_STATE_STATUS(path),
        AGENT_STATE_STATUS(test_failed), AGENT_STATE_STATUS(panic),
    };
#undef AGENT_STATE_STATUS
    std::map<std::int32_t, std::string> want, have;
    const JrNode &statuses = member(*description->root, "statuses");
    for (std::size_t i = 0; i < statuses.n; ++i) {
        const JrNode &code = member(*statuses.items[i], "code");
        want[std::stoi(std::string(code.raw, code.raw_len))] = text_of(member(*statuses.items[i], "name"));
    }
    for (const auto &[status, member] : enumerators) {
        std::string name = member == "ok" ? "AGENT_OK" : "AGENT_ERR_";
        if (member != "ok") {
            for (char c : member) name.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
        }
        const auto code = static_cast<std::int32_t>(status);
        CHECK(have.count(code) == 0);
        have[code] = name;
        CHECK_EQ(std::string(agent_state::status_name(status)), name);
    }
    for (const auto &[code, name] : want) {
        if (have.count(code) == 0) {
            fail(__FILE__, __LINE__, name + " (" + std::to_string(code) +
                                         ") has no enumerator in agent_state::Status (add it, "
                                         "and a line here)");
        } else {
            CHECK_EQ(have[code], name);
        }
    }
    CHECK_EQ(have.size(), want.size());
}
