/* app.c: a user's C program. tests/install/run.sh copies it out of the repository and builds it
 * against an installed copy only: cc app.c $(pkg-config --cflags --libs agent_state).
 * Usage: app STORE_PATH. Prints "agent_state VERSION: STATE" after merging {"from":"c"}. */
#include <agent_state.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    AgentHandle h;
    AgentBuffer state = { NULL, 0, NULL };
    const char *patch = "{\"from\":\"c\"}";
    if (argc != 2) {
        fprintf(stderr, "usage: app STORE_PATH\n");
        return 2;
    }
    if (strcmp(agent_version(), AGENT_STATE_VERSION) != 0) {
        fprintf(stderr, "header %s, library %s\n", AGENT_STATE_VERSION, agent_version());
        return 1;
    }
    if (agent_open(argv[1], "{\"initial_state\":{\"runs\":0}}", &h) != AGENT_OK) {
        fprintf(stderr, "%s\n", agent_last_error());
        return 1;
    }
    if (agent_set_state(h, (const uint8_t *)patch, strlen(patch), &state) != AGENT_OK) {
        fprintf(stderr, "%s\n", agent_last_error());
        agent_close(h);
        return 1;
    }
    printf("agent_state %s: %s\n", agent_version(), (const char *)state.data);
    agent_buffer_free(&state);
    return agent_close(h) == AGENT_OK ? 0 : 1;
}
