//go:build agentstate_inrepo && !agentstate_static

package agentstate

// With -tags agentstate_inrepo (the repository's own tests and benchmarks: goenv.sh sets it):
// the header from the checkout's include/ and the shared library it built,
// target/release/libagent_state.so, found at run time through an rpath to that directory.

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#cgo LDFLAGS: -L${SRCDIR}/../../target/release -Wl,-rpath,${SRCDIR}/../../target/release -lagent_state
*/
import "C"
