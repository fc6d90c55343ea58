//go:build agentstate_static

package agentstate

// With -tags agentstate_static: links target/release/libagent_state.a into the binary, which
// then needs no libagent_state.so at run time. The Rust standard library inside it needs libm,
// libdl and libpthread.

/*
#cgo LDFLAGS: ${SRCDIR}/../../target/release/libagent_state.a -lm -ldl -lpthread
*/
import "C"
