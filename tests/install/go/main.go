// A user's Go program: tests/install/run.sh copies it into modules outside the repository,
// which require the binding by its module path (a replace directive points at a copy of it, as
// nothing is fetched here): a copy of bindings/go, vendored and built against an installed
// library found with pkg-config; and the module of make dist's zip, which links its prebuilt
// archive. Usage: app STORE_PATH.
package main

import (
	"fmt"
	"os"

	agentstate "github.com/agent-state/agent-state/bindings/go"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: app STORE_PATH")
		os.Exit(2)
	}
	a, err := agentstate.Open(os.Args[1], agentstate.Options{InitialState: map[string]any{"runs": 0}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer a.Close()
	state, err := a.SetStateJSON([]byte(`{"from":"go"}`))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("agent_state %s: %s\n", agentstate.Version(), state)
}
