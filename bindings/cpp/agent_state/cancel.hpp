// agent_state/cancel.hpp: Cancel, a cancel token, and Cancel::Scope, which makes this thread's
// calls honour it. A part of the C++ wrapper: include "agent_state.hpp", which includes them all.

#ifndef AGENT_STATE_HPP_CANCEL
#define AGENT_STATE_HPP_CANCEL

#include <chrono>
#include <cstdint>

#include "agent_state.h"
#include "agent_state/hooks.hpp"
#include "agent_state/status.hpp"

namespace agent_state {

/// A cancel token (the C API's AgentCancel), move-only, freed on destruction. Calls made by a
/// thread inside a `Cancel::Scope` of the token throw `Error(Status::cancelled)` once it fires
/// (`cancel()`, from any thread) or its deadline passes, ending their wait for a lock, a
/// connection or the server; nothing is written. A commit under way is never cancelled.
///
/// ```cpp
/// agent_state::Cancel token(std::chrono::milliseconds(500));  // a deadline
/// {
///     agent_state::Cancel::Scope scope(token);
///     agent.set_state(R"({"status":"processing"})");           // throws after 500 ms of waiting
/// }
/// ```
/// Thread-safety: `cancel()` from any thread; a Scope binds for its own thread only.
class Cancel {
public:
    /// A token that fires only when `cancel()` is called.
    Cancel() { detail::check(agent_cancel_new(-1, &token_)); }

    /// A token that also fires by itself `timeout` from now.
    explicit Cancel(std::chrono::milliseconds timeout) {
        detail::check(agent_cancel_new(timeout.count() < 0 ? 0 : static_cast<std::int64_t>(timeout.count()),
                               &token_));
    }

    Cancel(Cancel &&other) noexcept : token_(other.token_) { other.token_ = 0; }
    Cancel &operator=(Cancel &&other) noexcept {
        if (this != &other) {
            release();
            token_ = other.token_;
            other.token_ = 0;
        }
        return *this;
    }
    Cancel(const Cancel &) = delete;
    Cancel &operator=(const Cancel &) = delete;
    ~Cancel() { release(); }

    /// Fires the token: calls waiting under it throw `Error(Status::cancelled)` within a few
    /// milliseconds; later calls under it at once.
    void cancel() const { detail::check(agent_cancel_fire(token_)); }

    /// The C token.
    AgentCancel raw() const noexcept { return token_; }

    /// Binds the token to this thread for the Scope's lifetime (the thread's calls honour it),
    /// then unbinds. Scopes do not nest: the end of an inner one unbinds.
    class Scope {
    public:
        explicit Scope(const Cancel &token) { detail::check(agent_cancel_bind(token.raw())); }
        Scope(const Scope &) = delete;
        Scope &operator=(const Scope &) = delete;
        ~Scope() { agent_cancel_bind(0); }
    };

private:
    void release() noexcept {
        if (token_ != 0) {
            agent_cancel_free(token_);
            token_ = 0;
        }
    }
    AgentCancel token_ = 0;
};

}  // namespace agent_state

#endif  // AGENT_STATE_HPP_CANCEL
