//go:build !agentstate_static

package agentstate

// Links the shared library target/release/libagent_state.so, found at run time through an
// rpath to the same directory. See the package documentation for static linking.

/*
#cgo LDFLAGS: -L${SRCDIR}/../../target/release -Wl,-rpath,${SRCDIR}/../../target/release -lagent_state
*/
import "C"
