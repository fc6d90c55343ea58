// agent_state/store.hpp: a store's agents: AgentInfo, list_agents(), delete_agent(),
// expire_agents() (agent_store_list, agent_store_delete, agent_store_expire), and the small
// reader of the library's list of agents (detail::parse_agent_infos).
// A part of the C++ wrapper: include "agent_state.hpp", which includes them all.

#ifndef AGENT_STATE_HPP_STORE
#define AGENT_STATE_HPP_STORE

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent_state.h"
#include "buffer.hpp"
#include "hooks.hpp"
#include "options.hpp"
#include "status.hpp"
#include "text.hpp"

namespace agent_state {

/// The page size of list_agents() by default.
inline constexpr std::uint32_t default_list_limit = 100;
/// The batch size of expire_agents() by default: the same in every binding and the command's
/// `expire --batch`.
inline constexpr std::uint32_t default_expire_limit = 1000;
/// The largest page (list_agents) or batch (expire_agents) the library takes.
inline constexpr std::uint32_t max_list_limit = 10000;

/// One agent of a store, as list_agents() and expire_agents() return it.
struct AgentInfo {
    /// The agent's id (Options::agent_id); `""` is a SQLite file's single agent, opened
    /// without an agent_id.
    std::string id;
    /// The version of its stored state (1 or more).
    std::uint64_t version = 0;
    /// The size of its stored state, in bytes.
    std::uint64_t bytes = 0;
    /// When its state was last written: milliseconds since the Unix epoch, by the writer's
    /// clock.
    std::int64_t written_at_ms = 0;

    /// written_at_ms as a time point of the system clock.
    std::chrono::system_clock::time_point written_at() const {
        return std::chrono::system_clock::time_point(
            std::chrono::duration_cast<std::chrono::system_clock::duration>(
                std::chrono::milliseconds(written_at_ms)));
    }
};

/// Equal when every member is.
inline bool operator==(const AgentInfo &a, const AgentInfo &b) {
    return a.id == b.id && a.version == b.version && a.bytes == b.bytes &&
           a.written_at_ms == b.written_at_ms;
}

/// Not operator==.
inline bool operator!=(const AgentInfo &a, const AgentInfo &b) { return !(a == b); }

namespace detail {

/// Reads the library's list of agents, the fixed shape
/// `[{"id":"...","version":N,"bytes":N,"written_at":MS},...]` (members in any order, others
/// skipped). Throws Error(Status::json) on anything else, naming `what`.
class AgentInfoReader {
public:
    AgentInfoReader(std::string_view text, const char *what) : s_(text), what_(what) {}

    std::vector<AgentInfo> read() {
        std::vector<AgentInfo> out;
        expect('[');
        if (!consume(']')) {
            do {
                out.push_back(entry());
            } while (consume(','));
            expect(']');
        }
        space();
        if (i_ != s_.size()) fail("text after the array");
        return out;
    }

private:
    AgentInfo entry() {
        AgentInfo info;
        bool id = false, version = false, bytes = false, written = false;
        expect('{');
        if (!consume('}')) {
            do {
                const std::string name = string();
                expect(':');
                if (name == "id") {
                    info.id = string();
                    id = true;
                } else if (name == "version") {
                    info.version = unsigned_number();
                    version = true;
                } else if (name == "bytes") {
                    info.bytes = unsigned_number();
                    bytes = true;
                } else if (name == "written_at") {
                    info.written_at_ms = signed_number();
                    written = true;
                } else {
                    skip_value();
                }
            } while (consume(','));
            expect('}');
        }
        if (!id || !version || !bytes || !written) fail("an entry without id, version, bytes or written_at");
        return info;
    }

    [[noreturn]] void fail(const char *why) const {
        throw Error(Status::json, std::string("agent_state::") + what_ +
                                      ": cannot read the library's list of agents: " + why +
                                      " at byte " + std::to_string(i_));
    }

    void space() {
        while (i_ < s_.size() &&
               (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) {
            ++i_;
        }
    }

    bool consume(char c) {
        space();
        if (i_ < s_.size() && s_[i_] == c) {
            ++i_;
            return true;
        }
        return false;
    }

    void expect(char c) {
        if (!consume(c)) fail("unexpected character");
    }

    unsigned hex_digit() {
        if (i_ >= s_.size()) fail("a truncated \\u escape");
        const char c = s_[i_++];
        if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0');
        if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
        if (c >= 'A' && c <= 'F') return static_cast<unsigned>(c - 'A' + 10);
        fail("a bad \\u escape");
    }

    unsigned hex4() {
        unsigned v = 0;
        for (int k = 0; k < 4; ++k) v = (v << 4) | hex_digit();
        return v;
    }

    static void put_utf8(std::string &out, std::uint32_t cp) {
        if (cp < 0x80) {
            out.push_back(static_cast<char>(cp));
        } else if (cp < 0x800) {
            out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
        } else if (cp < 0x10000) {
            out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
        } else {
            out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
        }
    }

    std::string string() {
        space();
        if (i_ >= s_.size() || s_[i_] != '"') fail("a string was expected");
        ++i_;
        std::string out;
        for (;;) {
            if (i_ >= s_.size()) fail("an unterminated string");
            const char c = s_[i_++];
            if (c == '"') return out;
            if (c != '\\') {
                out.push_back(c);
                continue;
            }
            if (i_ >= s_.size()) fail("an unterminated string");
            const char e = s_[i_++];
            switch (e) {
            case '"': out.push_back('"'); break;
            case '\\': out.push_back('\\'); break;
            case '/': out.push_back('/'); break;
            case 'b': out.push_back('\b'); break;
            case 'f': out.push_back('\f'); break;
            case 'n': out.push_back('\n'); break;
            case 'r': out.push_back('\r'); break;
            case 't': out.push_back('\t'); break;
            case 'u': {
                std::uint32_t cp = hex4();
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    if (i_ + 1 >= s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u') {
                        fail("a lone surrogate");
                    }
                    i_ += 2;
                    const std::uint32_t low = hex4();
                    if (low < 0xdc00 || low > 0xdfff) fail("a lone surrogate");
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
                } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                    fail("a lone surrogate");
                }
                put_utf8(out, cp);
                break;
            }
            default: fail("a bad escape");
            }
        }
    }

    std::uint64_t unsigned_number() {
        space();
        const std::size_t start = i_;
        std::uint64_t v = 0;
        while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
            const auto d = static_cast<std::uint64_t>(s_[i_] - '0');
            if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10) fail("a number too large");
            v = v * 10 + d;
            ++i_;
        }
        if (i_ == start) fail("a whole number was expected");
        if (i_ < s_.size() && (s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E')) {
            fail("a whole number was expected");
        }
        return v;
    }

    std::int64_t signed_number() {
        space();
        const bool negative = i_ < s_.size() && s_[i_] == '-';
        if (negative) ++i_;
        const std::uint64_t magnitude = unsigned_number();
        const auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
        if (magnitude > max + (negative ? 1U : 0U)) fail("a number out of range");
        if (!negative) return static_cast<std::int64_t>(magnitude);
        return magnitude == max + 1U ? std::numeric_limits<std::int64_t>::min()
                                     : -static_cast<std::int64_t>(magnitude);
    }

    void skip_value() {  // a member this reader does not know (a newer library)
        space();
        if (i_ >= s_.size()) fail("a value was expected");
        const char c = s_[i_];
        if (c == '"') {
            string();
        } else if (c == '{' || c == '[') {
            const char close = c == '{' ? '}' : ']';
            ++i_;
            if (consume(close)) return;
            do {
                if (c == '{') {
                    string();
                    expect(':');
                }
                skip_value();
            } while (consume(','));
            expect(close);
        } else {
            const std::size_t start = i_;
            while (i_ < s_.size() &&
                   std::string_view(" \t\r\n,:{}[]\"").find(s_[i_]) == std::string_view::npos) {
                ++i_;
            }
            if (i_ == start) fail("a value was expected");
        }
    }

    std::string_view s_;
    const char *what_;
    std::size_t i_ = 0;
};

/// The agents of the library's JSON array `text` (see AgentInfoReader).
inline std::vector<AgentInfo> parse_agent_infos(std::string_view text, const char *what) {
    return AgentInfoReader(text, what).read();
}

/// `text` as a C string for the function `what`: Error(Status::invalid_argument) for a NUL
/// byte or invalid UTF-8 (the library checks the length).
inline std::string store_text(std::string_view text, const char *what, const char *name) {
    if (text.find('\0') != std::string_view::npos) {
        throw Error(Status::invalid_argument,
                    std::string("agent_state::") + what + ": " + name + " holds a NUL byte");
    }
    if (!valid_utf8(text)) {
        throw Error(Status::invalid_argument,
                    std::string("agent_state::") + what + ": " + name + " is not valid UTF-8");
    }
    return std::string(text);
}

}  // namespace detail

/// The agents with a state stored in the store at `path` (a SQLite file or a PostgreSQL URI,
/// as for Agent), ordered by id (byte order of the UTF-8): at most `limit` (1 to
/// max_list_limit), those with an id after `after` (std::nullopt: from the first) that start
/// with `prefix` (std::nullopt: any). For the next page, pass the last id as `after`: a page
/// costs what it holds, whatever the store holds. A SQLite file's single agent (opened without
/// agent_id) is listed with the id `""`; agents opened but never written, and deleted ones,
/// are not listed.
///
/// Of `options`, busy_timeout_ms, server_timeout_ms, max_connections and read_only are used;
/// the agent's own (agent_id, initial_state, change_log, ...) are not. Listing never creates a
/// store. Honours a Cancel::Scope of this thread, as every call does.
/// Throws Error: invalid_argument (an empty path, a NUL byte, `limit` out of range, `prefix`
/// or `after` longer than 255 bytes or not UTF-8, a bad option), storage (no store there),
/// busy, unavailable, auth, cancelled; json for an answer this wrapper cannot read.
inline std::vector<AgentInfo> list_agents(std::string_view path, const Options &options = Options(),
                                          std::optional<std::string_view> prefix = std::nullopt,
                                          std::optional<std::string_view> after = std::nullopt,
                                          std::uint32_t limit = default_list_limit) {
    const std::string c_path = detail::store_text(path, "list_agents", "the path");
    const std::string c_options = options.to_json();
    std::optional<std::string> c_prefix, c_after;
    if (prefix) c_prefix = detail::store_text(*prefix, "list_agents", "the prefix");
    if (after) c_after = detail::store_text(*after, "list_agents", "after");
    Buffer out;
    detail::begin_call();
    detail::check(agent_store_list(c_path.c_str(), c_options.c_str(),
                                   c_prefix ? c_prefix->c_str() : nullptr,
                                   c_after ? c_after->c_str() : nullptr, limit, out.out()));
    return detail::parse_agent_infos(out.view(), "list_agents");
}

/// Deletes the agent `id` of the store at `path`: its state, its versions and its change log,
/// in one transaction (its change-log setting stays). Returns the version it had, or
/// std::nullopt when nothing was stored (nothing done: not an error). With `if_version`, only
/// if its state is still at that version (0: nothing stored); otherwise throws
/// Error(Status::conflict) and deletes nothing. `id` `""` is a SQLite file's single agent.
///
/// Agents open on it, in this process or another, find it gone at their next call: a read
/// returns their initial state at version 0; with the change log on, their hooks get the
/// deletion as one change (by poll(), or ahead of their next write) from the last state they
/// saw to their initial state, `patch` std::nullopt, `version` 0. The agent's next first write
/// takes the version after the one it was deleted at (a tombstone keeps a 64-bit hash of the
/// id, not the id, and that version), so a set_state_if against a version read before the
/// deletion never succeeds after it.
///
/// Erasure: on SQLite, once it returns, no byte of the deleted state or of its history is left
/// in the file or its WAL. If another connection's read outlasts busy_timeout_ms meanwhile, it
/// throws Error(Status::busy) after the deletion committed: call it again to finish the
/// erasure. On PostgreSQL the rows are deleted; what VACUUM, WAL archives and backups keep is
/// the server's (the book's guide "Erasure and retention", docs/src/guides/erasure-retention.md).
///
/// Of `options`, as for list_agents(). Throws Error: invalid_argument (an empty path, a NUL
/// byte, an id longer than 255 bytes or not UTF-8, `if_version` above INT64_MAX, a bad
/// option), conflict, storage (no store there, read_only), busy, unavailable, auth, cancelled.
inline std::optional<std::uint64_t> delete_agent(std::string_view path, std::string_view id,
                                                 const Options &options = Options(),
                                                 std::optional<std::uint64_t> if_version = std::nullopt) {
    const std::string c_path = detail::store_text(path, "delete_agent", "the path");
    const std::string c_id = detail::store_text(id, "delete_agent", "the agent id");
    const std::string c_options = options.to_json();
    std::int64_t expected = -1;
    if (if_version) {
        if (*if_version > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            throw Error(Status::invalid_argument,
                        "agent_state::delete_agent: if_version is above INT64_MAX");
        }
        expected = static_cast<std::int64_t>(*if_version);
    }
    std::uint64_t deleted = 0;
    detail::begin_call();
    detail::check(agent_store_delete(c_path.c_str(), c_options.c_str(), c_id.c_str(), expected,
                                     &deleted));
    if (deleted == 0) return std::nullopt;
    return deleted;
}

/// Deletes, as delete_agent() does, at most `limit` (1 to max_list_limit, default
/// default_expire_limit) agents of the store
/// at `path` whose state was last written more than `idle` ago, the longest idle first, in one
/// transaction, and returns them; with `dry_run`, deletes nothing and returns those it would
/// delete. An agent written during the call is not deleted. A call costs what it deletes,
/// whatever the store holds: call it until it returns fewer than `limit` (a timer, a cron job).
/// `idle` is any std::chrono duration that converts to milliseconds (hours, seconds, ...).
///
/// Of `options`, as for list_agents(). Throws Error: invalid_argument (a negative `idle`,
/// `limit` out of range), and as delete_agent() but conflict.
inline std::vector<AgentInfo> expire_agents(std::string_view path, std::chrono::milliseconds idle,
                                            const Options &options = Options(),
                                            std::uint32_t limit = default_expire_limit,
                                            bool dry_run = false) {
    const std::string c_path = detail::store_text(path, "expire_agents", "the path");
    const std::string c_options = options.to_json();
    if (idle.count() < 0) {
        throw Error(Status::invalid_argument, "agent_state::expire_agents: idle is negative");
    }
    Buffer out;
    detail::begin_call();
    detail::check(agent_store_expire(c_path.c_str(), c_options.c_str(),
                                     static_cast<std::uint64_t>(idle.count()), limit,
                                     dry_run ? 1 : 0, out.out()));
    return detail::parse_agent_infos(out.view(), "expire_agents");
}

}  // namespace agent_state

#endif  // AGENT_STATE_HPP_STORE
