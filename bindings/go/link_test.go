package agentstate

import (
	"os"
	"strings"
	"testing"
)

// TestLinkMode checks how the library was linked: the shared libagent_state.so by default,
// libagent_state.a with -tags agentstate_static (then no libagent_state.so is loaded).
func TestLinkMode(t *testing.T) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps:", err)
	}
	loaded := strings.Contains(string(maps), "libagent_state.so")
	if loaded == staticLink {
		t.Fatalf("static link %v, but libagent_state.so loaded: %v", staticLink, loaded)
	}
	a := openAgent(t, "", Options{})
	if _, err := a.SetState(map[string]any{"linked": true}); err != nil {
		t.Fatal(err)
	}
}
