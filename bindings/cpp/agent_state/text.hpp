// agent_state/text.hpp: JSON text and C strings: json_quote, and the checks the wrapper makes
// on text before it reaches the C library (exactly one JSON value, UTF-8, no NUL byte).
// A part of the C++ wrapper: include "agent_state.hpp", which includes them all.

#ifndef AGENT_STATE_HPP_TEXT
#define AGENT_STATE_HPP_TEXT

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "agent_state.h"
#include "status.hpp"

namespace agent_state {

/// Quotes `text` as a JSON string literal (with the surrounding quotes), escaping `"`, `\` and
/// control characters, for building patches and options safely:
/// `agent.set_state("{\"name\":" + agent_state::json_quote(name) + "}")`.
/// Bytes of 0x80 and above are copied as they are: `text` should be UTF-8 (the library refuses
/// invalid UTF-8 with Status::json).
inline std::string json_quote(std::string_view text) {
    static const char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(text.size() + 2);
    out.push_back('"');
    for (char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20 || c == 0x7f) {
                out += "\\u00";
                out.push_back(hex[c >> 4]);
                out.push_back(hex[c & 0xf]);
            } else {
                out.push_back(ch);
            }
        }
    }
    out.push_back('"');
    return out;
}

namespace detail {

/// A pointer the C library accepts for `text` (never NULL, so that empty text is reported as
/// malformed JSON rather than as a NULL argument).
inline const std::uint8_t *bytes(std::string_view text) noexcept {
    return reinterpret_cast<const std::uint8_t *>(text.empty() ? "" : text.data());
}

/// Throws Error(Status::json) unless `text` is exactly one JSON value, surrounded by optional
/// whitespace, with no NUL byte. Only the structure is checked (strings, brackets, top level);
/// the library parses it for real. This is what keeps embedded JSON from injecting members.
inline void check_one_value(std::string_view text, const char *what) {
    auto fail = [&](const char *why) {
        throw Error(Status::json, std::string("agent_state::Options: ") + what + " " + why);
    };
    if (text.find('\0') != std::string_view::npos) {
        fail("holds a NUL byte");
    }
    auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    std::size_t i = 0;
    const std::size_t n = text.size();
    while (i < n && is_space(text[i])) ++i;
    if (i == n) {
        fail("is empty, not a JSON value");
    }
    auto skip_string = [&]() {  // text[i] == '"'
        for (++i; i < n; ++i) {
            if (text[i] == '\\') {
                ++i;
            } else if (text[i] == '"') {
                ++i;
                return;
            }
        }
        fail("holds an unterminated string");
    };
    const char first = text[i];
    if (first == '{' || first == '[') {
        std::string open;  // the brackets still open
        while (i < n) {
            const char c = text[i];
            if (c == '"') {
                skip_string();
                continue;
            }
            if (c == '{' || c == '[') {
                open.push_back(c);
            } else if (c == '}' || c == ']') {
                if (open.empty() || (c == '}') != (open.back() == '{')) {
                    fail("has mismatched brackets");
                }
                open.pop_back();
                if (open.empty()) {
                    ++i;
                    break;
                }
            }
            ++i;
        }
        if (!open.empty()) {
            fail("is not complete (unclosed bracket)");
        }
    } else if (first == '"') {
        skip_string();
    } else {
        // A number or a literal: a run of characters that cannot start anything else.
        while (i < n && !is_space(text[i]) &&
               std::string_view(",:{}[]\"").find(text[i]) == std::string_view::npos) {
            ++i;
        }
    }
    while (i < n && is_space(text[i])) ++i;
    if (i != n) {
        fail("is not exactly one JSON value (text follows it)");
    }
}

/// True when `text` is valid UTF-8 (shortest forms, no surrogates, at most U+10FFFF).
inline bool valid_utf8(std::string_view text) noexcept {
    std::size_t i = 0;
    const std::size_t n = text.size();
    while (i < n) {
        const auto c = static_cast<unsigned char>(text[i]);
        std::size_t len = 0;
        std::uint32_t cp = 0;
        if (c < 0x80) {
            ++i;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
            cp = c & 0x1fU;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            cp = c & 0x0fU;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            cp = c & 0x07U;
        } else {
            return false;
        }
        if (n - i < len) return false;
        for (std::size_t k = 1; k < len; ++k) {
            const auto cc = static_cast<unsigned char>(text[i + k]);
            if ((cc & 0xc0U) != 0x80U) return false;
            cp = (cp << 6) | (cc & 0x3fU);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10ffff))) {
            return false;
        }
        i += len;
    }
    return true;
}

/// Throws Error(Status::invalid_argument) when `text`, about to be passed as a C string, holds
/// a NUL byte (the C library would silently see a truncated string).
inline void check_c_string(std::string_view text, const char *what, Status status) {
    if (text.find('\0') != std::string_view::npos) {
        throw Error(status, std::string("agent_state::Agent::open: ") + what + " holds a NUL byte");
    }
}

}  // namespace detail

}  // namespace agent_state

#endif  // AGENT_STATE_HPP_TEXT
