// app.cpp: a user's C++ program, built outside the repository against an installed copy:
// c++ -std=c++17 app.cpp $(pkg-config --cflags --libs agent_state).
// Usage: app STORE_PATH. Prints the state after merging {"from":"c++"}.
#include <agent_state.hpp>

#include <iostream>

int main(int argc, char **argv) {
    if (argc != 2) {
        std::cerr << "usage: app STORE_PATH\n";
        return 2;
    }
    try {
        agent_state::Options options;
        options.initial_state = R"({"runs":0})";
        agent_state::Agent agent = agent_state::Agent::open(argv[1], options);
        std::cout << agent.set_state(R"({"from":"c++"})") << "\n";
    } catch (const agent_state::Error &e) {
        std::cerr << e.what() << "\n";
        return 1;
    }
    return 0;
}
