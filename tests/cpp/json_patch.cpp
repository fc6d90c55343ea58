// The C++ wrapper's tests (tests/cpp/main.cpp runs them): RFC 6902 JSON Patch writes
// (Agent::patch_state, patch_state_if) and reads of one place by JSON Pointer (get_path,
// get_tail): appends, compare-and-set, what hooks, the validator and the change log see
// (ChangeKind::json_patch), and Status::path / Status::test_failed with nothing written. The
// public RFC 6902 suite runs through the wrapper in tests/cpp/json_patch_cases.cpp.

#include "harness.hpp"

TEST_FILE(12);

namespace {

// `expr` throws Error(st), whose message names `fn` and holds `has`; the state and version are
// as they were.
#define CHECK_PATCH_REFUSED(agent, expr, st, has)                                          \
    do {                                                                                   \
        const agent_state::Versioned before_ = (agent).get_state_versioned();              \
        const Error e_ = CATCH_ERROR(expr);                                                \
        CHECK_EQ(status_text(e_.status()), status_text(st));                               \
        if (!contains(e_.what(), has)) {                                                   \
            fail(__FILE__, __LINE__, std::string("the message \"") + e_.what() +          \
                                         "\" does not contain \"" + (has) + "\"");        \
        }                                                                                  \
        const agent_state::Versioned after_ = (agent).get_state_versioned();               \
        CHECK_EQ(after_.state, before_.state);                                             \
        CHECK_EQ(after_.version, before_.version);                                         \
    } while (0)

}  // namespace

TEST(json_patch_statuses_are_17_and_18) {
    CHECK_EQ(static_cast<int>(Status::path), 17);
    CHECK_EQ(static_cast<int>(Status::test_failed), 18);
    CHECK_EQ(std::string(agent_state::status_name(Status::path)), "AGENT_ERR_PATH");
    CHECK_EQ(std::string(Error(Status::test_failed, "x").name()), "AGENT_ERR_TEST_FAILED");
    CHECK_EQ(static_cast<int>(agent_state::ChangeKind::json_patch), AGENT_CHANGE_JSON_PATCH);
}

TEST(patch_state_appends_and_applies_every_operation) {
    Agent agent = open_store(path_in_dir("patch.db"));
    CHECK_EQ(agent.patch_state(R"([{"op":"add","path":"/messages","value":[]}])"),
             R"({"messages":[]})");
    const std::string append = R"([{"op":"add","path":"/messages/-","value":{"role":"user","text":"hi"}}])";
    CHECK_EQ(agent.patch_state(append), R"({"messages":[{"role":"user","text":"hi"}]})");
    CHECK_EQ(agent.patch_state(append),
             R"({"messages":[{"role":"user","text":"hi"},{"role":"user","text":"hi"}]})");
    CHECK_EQ(agent.get_state_versioned().version, 3u);
    // Every operation in one patch, one version.
    CHECK_EQ(agent.patch_state(R"([{"op":"test","path":"/messages/0/role","value":"user"},)"
                               R"({"op":"replace","path":"/messages/1/text","value":"hello"},)"
                               R"({"op":"copy","from":"/messages/1","path":"/last"},)"
                               R"({"op":"move","from":"/last/text","path":"/said"},)"
                               R"({"op":"remove","path":"/messages/0"},)"
                               R"({"op":"add","path":"/a~1b","value":1.50}])"),
             R"({"messages":[{"role":"user","text":"hello"}],"last":{"role":"user"},"said":"hello","a/b":1.50})");
    CHECK_EQ(agent.get_state_versioned().version, 4u);
    // As a Buffer; an empty patch commits nothing.
    CHECK_EQ(agent.patch_state_buffer("[]").str(), agent.get_state());
    CHECK_EQ(agent.get_state_versioned().version, 4u);
    // The wrapper passes an empty view as empty text: malformed JSON, not a NULL pointer.
    CHECK_ERROR(agent.patch_state(std::string_view()), Status::json);
}

TEST(patch_state_if_writes_only_at_the_expected_version) {
    Agent agent = open_store(path_in_dir("patch_if.db"));
    Agent other = open_store(path_in_dir("patch_if.db"));
    const std::string append = R"([{"op":"add","path":"/log/-","value":1}])";
    const agent_state::Versioned first = agent.patch_state_if(0, R"([{"op":"add","path":"/log","value":[]}])");
    CHECK_EQ(first.state, R"({"log":[]})");
    CHECK_EQ(first.version, 1u);
    CHECK_EQ(agent.patch_state_if(1, append).version, 2u);
    other.patch_state(append);
    CHECK_PATCH_REFUSED(agent, agent.patch_state_if(2, append), Status::conflict,
                        "agent_patch_state_if");
    const agent_state::Versioned retried = agent.patch_state_if(3, append);
    CHECK_EQ(retried.state, R"({"log":[1,1,1]})");
    CHECK_EQ(retried.version, 4u);
}

TEST(hooks_validator_and_change_log_see_the_operations) {
    Agent agent = open_store(path_in_dir("patch_seen.db"), with_log(agent_state::ChangeLog::last(10)));
    std::vector<agent_state::ChangeKind> kinds;
    std::vector<std::optional<std::string>> patches;
    std::vector<Delivery> plain;
    std::optional<std::string> gated;
    agent.on_change([&](const agent_state::Change &c) {
        kinds.push_back(c.kind);
        patches.push_back(c.patch ? std::optional<std::string>(std::string(*c.patch)) : std::nullopt);
    });
    agent.on_state_changed(recorder(plain));
    agent.set_validator([&](const agent_state::Change &c) {
        if (c.kind != agent_state::ChangeKind::json_patch) return;
        gated = std::string(*c.patch);
        if (contains(*c.patch, "remove")) throw std::runtime_error("no deleting of messages");
    });
    agent.replace_state(R"({"messages":[]})");
    const std::string append = R"([{"op":"add","path":"/messages/-","value":"hi"}])";
    agent.patch_state(append);
    CHECK_EQ(kinds.size(), 2u);
    CHECK(kinds.at(1) == agent_state::ChangeKind::json_patch);
    CHECK(kinds.at(0) == agent_state::ChangeKind::replace);
    CHECK_EQ(patches.at(1).value_or("(none)"), append);
    CHECK_EQ(plain.at(1).patch.value_or("(none)"), append);
    CHECK_EQ(gated.value_or("(none)"), append);
    // Rejected: nothing written, no hook.
    CHECK_PATCH_REFUSED(agent, agent.patch_state(R"([{"op":"remove","path":"/messages/0"}])"),
                        Status::rejected, "no deleting of messages");
    CHECK_EQ(kinds.size(), 2u);
    const std::string log = without_times(agent.changes_since(1));
    CHECK_EQ(log, R"([{"version":2,"at":0,"kind":"json_patch","schema":0,"migrated_from":null,)"
                  R"("patch":[{"op":"add","path":"/messages/-","value":"hi"}],"next":{"messages":["hi"]}}])");
    CHECK_EQ(agent.state_at(2), R"({"messages":["hi"]})");
}

TEST(patch_state_refuses_bad_operations_with_nothing_written) {
    Options options;
    options.max_value_bytes = 256;
    Agent agent = open_store(path_in_dir("patch_bad.db"), options);
    agent.replace_state(R"({"a":{"b":[1,2,3]},"q":1})");
    CHECK_PATCH_REFUSED(agent, agent.patch_state("{}"), Status::invalid_argument, "agent_patch_state");
    CHECK_PATCH_REFUSED(agent, agent.patch_state(R"([{"op":"frob","path":"/a"}])"),
                        Status::invalid_argument, "operation 0");
    CHECK_PATCH_REFUSED(agent, agent.patch_state(R"([{"op":"remove","path":"/a/~2"}])"),
                        Status::invalid_argument, R"(operation 0 (remove "/a/~2"))");
    CHECK_PATCH_REFUSED(agent, agent.patch_state(R"([{"op":"remove","path":"/a/b/01"}])"),
                        Status::path, R"(operation 0 (remove "/a/b/01"))");
    CHECK_PATCH_REFUSED(agent, agent.patch_state(R"([{"op":"add","path":"/x","value":1},{"op":"remove","path":"/nope"}])"),
                        Status::path, R"(operation 1 (remove "/nope"))");
    CHECK_PATCH_REFUSED(agent, agent.patch_state(R"([{"op":"test","path":"/q","value":2}])"),
                        Status::test_failed, R"(operation 0 (test "/q"))");
    CHECK_PATCH_REFUSED(agent, agent.patch_state_if(1, R"([{"op":"test","path":"/q","value":"1"}])"),
                        Status::test_failed, "agent_patch_state_if");
    CHECK_PATCH_REFUSED(agent, agent.patch_state(R"([{"op":"add","op":"add","path":"/x","value":1}])"),
                        Status::codec, "duplicate");
    CHECK_PATCH_REFUSED(agent, agent.patch_state("[{\"op\":\"add\",\"path\":\"/x\",\"value\":\"\xff\"}]"),
                        Status::json, "UTF-8");
    CHECK_PATCH_REFUSED(agent, agent.patch_state(R"([{"op":"add","path":"/x","value":")" +
                                                 std::string(300, 'x') + R"("}])"),
                        Status::too_large, "max_value_bytes");
    agent.close();
    CHECK_ERROR(agent.patch_state("[]"), Status::bad_handle);
    CHECK_ERROR(agent.patch_state_if(0, "[]"), Status::bad_handle);
    CHECK_ERROR(agent.get_path(""), Status::bad_handle);
    CHECK_ERROR(agent.get_tail("", 1), Status::bad_handle);
}

TEST(get_path_and_get_tail_read_one_place) {
    Options options;
    options.initial_state = R"({"messages":["hello"]})";
    Agent agent = open_store(path_in_dir("paths.db"), options);
    // Nothing stored: the initial state, and reading stores nothing.
    CHECK_EQ(agent.get_path(""), R"({"messages":["hello"]})");
    CHECK_EQ(agent.get_path(std::string_view()), R"({"messages":["hello"]})");
    CHECK_EQ(agent.get_tail("/messages", 1), R"(["hello"])");
    CHECK_EQ(agent.get_state_versioned().version, 0u);
    agent.replace_state(R"({"messages":[],"a/b":{"m~n":[true,null]}})");
    for (int i = 0; i < 4; ++i) {
        agent.patch_state(R"([{"op":"add","path":"/messages/-","value":{"n":)" + std::to_string(i) + "}}]");
    }
    CHECK_EQ(agent.get_path("/messages/2"), R"({"n":2})");
    CHECK_EQ(agent.get_path("/messages/3/n"), "3");
    CHECK_EQ(agent.get_path("/a~1b/m~0n/1"), "null");
    // A view that is not NUL-terminated: only its bytes count.
    const std::string longer = "/messages/1/n and more";
    CHECK_EQ(agent.get_path(std::string_view(longer).substr(0, 11)), R"({"n":1})");
    CHECK_EQ(agent.get_tail("/messages", 1), R"([{"n":3}])");
    CHECK_EQ(agent.get_tail("/messages", 2), R"([{"n":2},{"n":3}])");
    CHECK_EQ(agent.get_tail("/messages", 0), "[]");
    CHECK_EQ(agent.get_tail("/messages", 100), R"([{"n":0},{"n":1},{"n":2},{"n":3}])");
    // Errors.
    CHECK_ERROR(agent.get_path("messages"), Status::invalid_argument);
    CHECK_ERROR(agent.get_path("/~2"), Status::invalid_argument);
    CHECK_ERROR(agent.get_path("/\xff"), Status::invalid_argument);
    const Error missing = CATCH_ERROR(agent.get_path("/nope"));
    CHECK(missing.status() == Status::path);
    CHECK(contains(missing.what(), "agent_get_path"));
    CHECK(contains(missing.what(), "\"/nope\""));
    CHECK_ERROR(agent.get_path("/messages/4"), Status::path);
    CHECK_ERROR(agent.get_path("/messages/01"), Status::path);
    CHECK_ERROR(agent.get_path("/messages/-"), Status::path);
    CHECK_ERROR(agent.get_tail("/nope", 1), Status::path);
    CHECK_ERROR(agent.get_tail("/a~1b", 1), Status::invalid_argument);
    CHECK_ERROR(agent.get_tail("", 1), Status::invalid_argument);
    CHECK_EQ(agent.get_state_versioned().version, 5u);
}
