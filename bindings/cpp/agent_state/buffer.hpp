// agent_state/buffer.hpp: Buffer, the move-only owner of library-owned JSON text.
// A part of the C++ wrapper: include "agent_state.hpp", which includes them all.

#ifndef AGENT_STATE_HPP_BUFFER
#define AGENT_STATE_HPP_BUFFER

#include <cstddef>
#include <string>
#include <string_view>

#include "agent_state.h"

namespace agent_state {

/// Move-only owner of an AgentBuffer: a read-only view of library-owned JSON text (followed by a
/// NUL byte), released with `agent_buffer_free` on destruction. The bytes never change while
/// the Buffer lives, even if the state changes or the Agent is closed.
/// Thread-safety: a Buffer may be read from many threads; it is not synchronized otherwise.
class Buffer {
public:
    /// An empty buffer.
    Buffer() noexcept = default;

    /// Takes ownership of `raw`, a buffer filled by the library (or empty).
    explicit Buffer(AgentBuffer raw) noexcept : buf_(raw) {}

    /// Moves the bytes out of `other`, which becomes empty.
    Buffer(Buffer &&other) noexcept : buf_(other.buf_) { other.buf_ = AgentBuffer{nullptr, 0, nullptr}; }

    /// Releases this buffer's bytes and takes `other`'s.
    Buffer &operator=(Buffer &&other) noexcept {
        if (this != &other) {
            reset();
            buf_ = other.buf_;
            other.buf_ = AgentBuffer{nullptr, 0, nullptr};
        }
        return *this;
    }

    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;

    /// Releases the bytes.
    ~Buffer() { reset(); }

    /// Releases the bytes now; the buffer becomes empty.
    void reset() noexcept { agent_buffer_free(&buf_); }

    /// The JSON text (empty for an empty buffer).
    std::string_view view() const noexcept {
        return buf_.data == nullptr
                   ? std::string_view()
                   : std::string_view(reinterpret_cast<const char *>(buf_.data), buf_.len);
    }

    /// The JSON text as a NUL-terminated C string (`""` for an empty buffer).
    const char *c_str() const noexcept {
        return buf_.data == nullptr ? "" : reinterpret_cast<const char *>(buf_.data);
    }

    /// The first byte, or nullptr for an empty buffer.
    const char *data() const noexcept { return reinterpret_cast<const char *>(buf_.data); }

    /// The number of bytes, not counting the NUL terminator.
    std::size_t size() const noexcept { return buf_.len; }

    /// True when the buffer holds nothing.
    bool empty() const noexcept { return buf_.data == nullptr; }

    /// A copy of the JSON text.
    std::string str() const { return std::string(view()); }

    /// The JSON text, as view().
    operator std::string_view() const noexcept { return view(); }

    /// Releases the current bytes and returns the raw buffer for a C call to fill.
    AgentBuffer *out() noexcept {
        reset();
        return &buf_;
    }

    /// Gives up ownership: the caller must pass the result to `agent_buffer_free`.
    AgentBuffer release() noexcept {
        AgentBuffer raw = buf_;
        buf_ = AgentBuffer{nullptr, 0, nullptr};
        return raw;
    }

private:
    AgentBuffer buf_{nullptr, 0, nullptr};
};

}  // namespace agent_state

#endif  // AGENT_STATE_HPP_BUFFER
