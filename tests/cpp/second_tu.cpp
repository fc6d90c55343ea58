// A second translation unit including the header: proves it is ODR-safe (inline functions and
// inline thread_local variables, no duplicate symbols) and that a hook registered here and an
// exception thrown here reach the triggering call in the other translation unit (for a
// validator: nested in the Error(Status::rejected) that call throws).
//
// It includes a part of the wrapper first (agent_state/agent.hpp, which includes the parts it
// needs), then the umbrella header the other translation units include: the definitions the
// linker sees here come through another path than theirs, and the include guards make the
// second inclusion add nothing.

#include "agent_state/agent.hpp"

#include "agent_state.hpp"

#include <stdexcept>
#include <string>

namespace second_tu {

/// Thrown by the hook registered below.
struct Failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// Registers a hook that throws Failure when the new state has member "fail".
agent_state::HookId register_throwing_hook(agent_state::Agent &agent) {
    return agent.on_state_changed(
        [](std::string_view next, std::string_view, std::optional<std::string_view>) {
            if (next.find("\"fail\"") != std::string_view::npos) {
                throw Failure("thrown in second_tu: " + std::string(next));
            }
        });
}

/// Sets a validator that throws Failure when the new state has member "forbidden".
void set_throwing_validator(agent_state::Agent &agent) {
    agent.set_validator([](const agent_state::Change &change) {
        if (change.next.find("\"forbidden\"") != std::string_view::npos) {
            throw Failure("rejected in second_tu at version " + std::to_string(change.version));
        }
    });
}

/// Writes through the wrapper from this translation unit.
std::string write_from_second_tu(agent_state::Agent &agent, std::string_view patch) {
    return agent.set_state(patch);
}

}  // namespace second_tu
