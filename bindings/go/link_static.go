//go:build agentstate_static

package agentstate

// With -tags agentstate_static (inside the repository): the header from the checkout's include/
// and target/release/libagent_state.a linked into the binary, which then needs no
// libagent_state.so at run time. The Rust standard library inside it needs libm, libdl and
// libpthread.

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#cgo LDFLAGS: ${SRCDIR}/../../target/release/libagent_state.a -lm -ldl -lpthread
*/
import "C"
