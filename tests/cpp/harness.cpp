// The harness of the C++ wrapper's tests (declared, and described, in harness.hpp).

#include "harness.hpp"

std::vector<TestCase> &registry() {
    static std::vector<TestCase> tests;
    return tests;
}

int g_failures = 0;       // failed checks in the running test
fs::path g_dir;           // the running test's private directory
bool g_quick = false;

void fail(const char *file, int line, const std::string &what) {
    ++g_failures;
    std::cout << "    " << file << ":" << line << ": " << what << "\n";
}

std::string status_text(Status s) {
    return std::string(agent_state::status_name(s)) + " (" +
           std::to_string(static_cast<int>(s)) + ")";
}

fs::path path_in_dir(const char *name) { return g_dir / name; }

bool g_pg = false;
std::string g_pg_uri;
std::string g_agent_prefix;           // "cpp_<pid>_<start time>_"
int g_test_index = 0;                 // the running test's number

namespace {
std::atomic<unsigned> g_memory_stores{0};
}  // namespace

std::string agent_for(const std::string &where) {
    const std::string test = g_agent_prefix + std::to_string(g_test_index) + "_";
    if (where == ":memory:") return test + "mem" + std::to_string(++g_memory_stores);
    const fs::path p(where);
    if (p.parent_path() != g_dir) return std::string();
    static const char hex[] = "0123456789ABCDEF";
    std::string id = test;
    for (const char ch : p.filename().string()) {
        const auto c = static_cast<unsigned char>(ch);
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            c == '.' || c == '-' || c == '_') {
            id.push_back(ch);
        } else {
            id.push_back('%');
            id.push_back(hex[c >> 4]);
            id.push_back(hex[c & 0xf]);
        }
    }
    return id;
}

Agent open_store(const fs::path &place, Options options) {
    const std::string where = place.string();
    if (!g_pg) return Agent(where, options);
    std::string id = agent_for(where);
    if (id.empty()) return Agent(where, options);
    if (options.agent_id) id += "." + *options.agent_id;
    options.agent_id = id;
    return Agent(g_pg_uri, options);
}

Agent open_store_json(const fs::path &place, std::string_view options_json) {
    const std::string where = place.string();
    if (!g_pg) return Agent::open(where, options_json);
    const std::string id = agent_for(where);
    if (id.empty()) return Agent::open(where, options_json);
    std::size_t i = 0;
    while (i < options_json.size() && options_json[i] == ' ') ++i;
    if (i == options_json.size() || options_json[i] != '{') {
        return Agent::open(g_pg_uri, options_json);
    }
    std::string_view rest = options_json.substr(i + 1);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    std::string text = "{\"agent_id\":" + agent_state::json_quote(id);
    if (rest.empty() || rest.front() != '}') text += ",";
    text += rest;
    return Agent::open(g_pg_uri, text);
}

Error catch_error(const std::function<void()> &fn, const char *file, int line) {
    try {
        fn();
    } catch (const Error &e) {
        return e;
    } catch (const std::exception &e) {
        fail(file, line, std::string("expected agent_state::Error, got ") + e.what());
        return Error(Status::ok, "");
    }
    fail(file, line, "expected agent_state::Error, nothing thrown");
    return Error(Status::ok, "");
}

bool contains(std::string_view haystack, std::string_view needle) {
    return haystack.find(needle) != std::string_view::npos;
}

std::string read_file(const fs::path &p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

agent_state::StateChangedFn recorder(std::vector<Delivery> &log) {
    return [&log](std::string_view next, std::string_view prev, std::optional<std::string_view> patch) {
        Delivery d{std::string(next), std::string(prev), std::nullopt};
        if (patch) d.patch = std::string(*patch);
        log.push_back(std::move(d));
    };
}

std::ostream &operator<<(std::ostream &os, const VersionedDelivery &d) {
    return os << "{v" << d.version << " prev " << d.prev << " next " << d.next << " patch "
              << (d.patch ? *d.patch : std::string("nullopt")) << "}";
}

bool operator==(const VersionedDelivery &a, const VersionedDelivery &b) {
    return a.version == b.version && a.prev == b.prev && a.next == b.next && a.patch == b.patch;
}

agent_state::ChangeFn change_recorder(std::vector<VersionedDelivery> &log) {
    return [&log](const agent_state::Change &c) {
        VersionedDelivery d{c.version, std::string(c.prev), std::string(c.next), std::nullopt};
        if (c.patch) d.patch = std::string(*c.patch);
        log.push_back(std::move(d));
    };
}

Options with_log(agent_state::ChangeLog log) {
    Options options;
    options.change_log = log;
    options.synchronous = agent_state::Synchronous::normal;
    return options;
}

std::string without_times(const std::string &json) {
    std::string out;
    std::size_t pos = 0;
    for (;;) {
        const std::size_t at = json.find("\"at\":", pos);
        if (at == std::string::npos) break;
        std::size_t end = at + 5;
        while (end < json.size() && json[end] >= '0' && json[end] <= '9') ++end;
        out += json.substr(pos, at + 5 - pos) + "0";
        pos = end;
    }
    return out + json.substr(pos);
}
