// The C++ wrapper's tests (tests/cpp/main.cpp runs them): schema versions. Options::
// schema_version and schema_steps, Agent::set_schema_step, schema_version(), state_at_stored(),
// upgrade_state(), the change view's kind, schema and migrated_from, and the two statuses
// newer_schema and migration.

#include "harness.hpp"

TEST_FILE(11);

namespace {

using agent_state::Change;
using agent_state::ChangeKind;

// Schema 2: step 0 -> 1 renames user.nick to user.name, step 1 -> 2 adds messages.
constexpr const char *k_steps =
    R"([{"from":0,"ops":[{"op":"rename","path":"/user/nick","to":"name"}]},)"
    R"({"from":1,"ops":[{"op":"default","path":"/messages","value":[]}]}])";

Options v2_options() {
    Options o;
    o.schema_version = 2;
    o.schema_steps = k_steps;
    return o;
}

// What an on_change hook saw of a change's kind and schema.
struct Seen {
    std::uint64_t version;
    ChangeKind kind;
    std::uint32_t schema;
    std::optional<std::uint32_t> migrated_from;
    bool has_patch;
};

}  // namespace

TEST(schema_options_reach_the_json_and_are_checked) {
    Options o = v2_options();
    CHECK(contains(o.to_json(), R"("schema_version":2)"));
    CHECK(contains(o.to_json(), std::string(R"("schema_steps":)") + k_steps));
    o.schema_steps = R"([] ,"read_only":true)";  // never another option smuggled in
    CHECK_ERROR(o.to_json(), Status::json);
    o.schema_steps = R"([{"from":0,"ops":[{"op":"explode"}]}])";
    CHECK_ERROR(open_store(path_in_dir("bad.db"), o), Status::invalid_argument);
    o = Options();
    o.schema_version = 1000001;
    CHECK_ERROR(open_store(path_in_dir("bad.db"), o), Status::invalid_argument);
    CHECK_EQ(static_cast<int>(Status::newer_schema), 15);
    CHECK_EQ(static_cast<int>(Status::migration), 16);
    CHECK_EQ(std::string(agent_state::status_name(Status::migration)), "AGENT_ERR_MIGRATION");
}

TEST(an_older_state_is_upgraded_on_first_read_as_a_migration) {
    const fs::path place = path_in_dir("s.db");
    {
        Agent v0 = open_store(place);
        CHECK_EQ(v0.schema_version(), 0u);
        v0.set_state(R"({"user":{"nick":"ada"}})");
    }
    Agent v2 = open_store(place, v2_options());
    CHECK_EQ(v2.schema_version(), 2u);
    std::vector<Seen> seen;
    v2.on_change([&seen](const Change &c) {
        seen.push_back({c.version, c.kind, c.schema, c.migrated_from, c.patch.has_value()});
    });
    const auto read = v2.get_state_versioned();
    CHECK_EQ(read.state, std::string(R"({"user":{"name":"ada"},"messages":[]})"));
    CHECK_EQ(read.version, 2u);  // the migration is a change of its own
    CHECK_EQ(seen.size(), 1u);
    if (seen.size() == 1) {
        CHECK_EQ(seen[0].version, 2u);
        CHECK(seen[0].kind == ChangeKind::migration);
        CHECK_EQ(seen[0].schema, 2u);
        CHECK(seen[0].migrated_from == std::optional<std::uint32_t>(0));
        CHECK(!seen[0].has_patch);
    }
    // once: reading again writes nothing; a write is an ordinary merge under schema 2
    CHECK_EQ(v2.get_state_versioned().version, 2u);
    v2.set_state(R"({"messages":["hi"]})");
    CHECK_EQ(seen.size(), 2u);
    if (seen.size() == 2) {
        CHECK(seen[1].kind == ChangeKind::merge);
        CHECK_EQ(seen[1].schema, 2u);
        CHECK(!seen[1].migrated_from.has_value());
        CHECK(seen[1].has_patch);
    }
}

TEST(an_older_program_is_refused_a_newer_state_and_read_only_reads_it) {
    const fs::path place = path_in_dir("s.db");
    Agent v2 = open_store(place, v2_options());
    v2.set_state(R"({"user":{"name":"ada"}})");
    Agent v0 = open_store(place);
    const Error read = CATCH_ERROR(v0.get_state());
    CHECK(read.status() == Status::newer_schema);
    CHECK_ERROR(v0.set_state(R"({"user":null})"), Status::newer_schema);
    CHECK_ERROR(v0.replace_state("{}"), Status::newer_schema);
    CHECK_EQ(v2.get_state_versioned().version, 1u);  // nothing written
    CHECK_EQ(v2.get_state(), std::string(R"({"user":{"name":"ada"}})"));

    Options ro;
    ro.read_only = true;
    Agent reader = open_store(place, ro);
    CHECK_EQ(reader.get_state(), std::string(R"({"user":{"name":"ada"}})"));
}

TEST(a_step_of_code_runs_and_its_exception_fails_the_migration) {
    const fs::path place = path_in_dir("s.db");
    {
        Agent v0 = open_store(place);
        v0.set_state(R"({"status":"idle"})");
    }
    Options o;
    o.schema_version = 1;
    Agent v1 = open_store(place, o);
    // a missing step fails the migration
    const Error missing = CATCH_ERROR(v1.get_state());
    CHECK(missing.status() == Status::migration);
    // a step that throws: its what() is the failure's message, nothing written
    v1.set_schema_step(0, [](std::string_view) -> std::string {
        throw std::runtime_error("status is unknown");
    });
    const Error failed = CATCH_ERROR(v1.set_state(R"({"x":1})"));
    CHECK(failed.status() == Status::migration);
    CHECK(contains(failed.what(), "schema step 0 -> 1"));
    CHECK(contains(failed.what(), "status is unknown"));
    // a throw of something that is not a std::exception fails it too
    v1.set_schema_step(0, [](std::string_view) -> std::string { throw 42; });
    CHECK_ERROR(v1.get_state(), Status::migration);
    // an answer that is not an object
    v1.set_schema_step(0, [](std::string_view) { return std::string("[1]"); });
    CHECK_ERROR(v1.get_state(), Status::migration);
    {
        Agent v0 = open_store(place, Options());
        CHECK_EQ(v0.get_state_versioned().version, 1u);
        CHECK_EQ(v0.get_state(), std::string(R"({"status":"idle"})"));
    }
    // a working step: sees the stored state, its answer is committed, then the write
    std::string saw;
    v1.set_schema_step(0, [&saw](std::string_view state) {
        saw = std::string(state);
        return std::string(R"({"status":{"name":"idle"}})");
    });
    // a compare-and-set that cannot hold fails before anything is committed: no migration
    CHECK_ERROR(v1.set_state_if(7, R"({"x":1})"), Status::conflict);
    CHECK(saw.empty());
    // a compare-and-set at the version read before the migration conflicts (the migration
    // is committed: the state changed shape under it)
    CHECK_ERROR(v1.set_state_if(1, R"({"x":1})"), Status::conflict);
    CHECK_EQ(saw, std::string(R"({"status":"idle"})"));
    const auto written = v1.set_state_if(2, R"({"x":1})");
    CHECK_EQ(written.state, std::string(R"({"status":{"name":"idle"},"x":1})"));
    CHECK_EQ(written.version, 3u);  // the migration, then the write
    // arguments: a step at or above the Agent's version, one the options cover, a closed Agent
    CHECK_ERROR(v1.set_schema_step(1, [](std::string_view s) { return std::string(s); }),
                Status::invalid_argument);
    Agent covered = open_store(path_in_dir("t.db"), v2_options());
    CHECK_ERROR(covered.set_schema_step(0, [](std::string_view s) { return std::string(s); }),
                Status::invalid_argument);
    v1.clear_schema_step(0);
    v1.close();
    CHECK_ERROR(v1.set_schema_step(0, [](std::string_view s) { return std::string(s); }),
                Status::bad_handle);
    CHECK_ERROR(v1.schema_version(), Status::bad_handle);
}

TEST(history_reads_as_stored_and_upgrade_state_upgrades) {
    const fs::path place = path_in_dir("s.db");
    {
        Agent v0 = open_store(place, with_log(agent_state::ChangeLog::last(10)));
        v0.set_state(R"({"user":{"nick":"ada"}})");
    }
    Agent v2 = open_store(place, v2_options());
    CHECK_EQ(v2.get_state_versioned().version, 2u);
    const auto old = v2.state_at_stored(1);
    CHECK_EQ(old.state, std::string(R"({"user":{"nick":"ada"}})"));
    CHECK_EQ(old.schema, 0u);
    const auto now = v2.state_at_stored(2);
    CHECK_EQ(now.schema, 2u);
    CHECK_EQ(v2.upgrade_state(old.state, old.schema), now.state);
    CHECK_EQ(v2.upgrade_state(now.state, 2), now.state);  // already current
    CHECK(contains(v2.changes_since(1), R"("schema":2,"migrated_from":0,"patch":null)"));
    CHECK_ERROR(v2.upgrade_state("{}", 3), Status::newer_schema);
    CHECK_ERROR(v2.upgrade_state("[1]", 0), Status::invalid_argument);
    CHECK_ERROR(v2.upgrade_state("{", 0), Status::json);
    // restore writes the old state back upgraded
    v2.set_state(R"({"messages":["hi"]})");
    const auto restored = v2.restore(1);
    CHECK_EQ(restored.state, now.state);
    CHECK_EQ(restored.version, 4u);
    CHECK_EQ(v2.state_at_stored(restored.version).schema, 2u);
}
