//go:build linux && amd64 && !agentstate_pkgconfig && !agentstate_inrepo && !agentstate_static

package agentstate

// By default on linux/amd64: the prebuilt static archive shipped inside the module, as `make
// dist` stages it (target/dist/go, zipped as agent_state-go-VERSION.zip beside a release):
// lib/linux_amd64/libagent_state.a and include/agent_state.h next to this file. The program
// then needs no pkg-config, no Rust toolchain and no libagent_state.so at run time; the Rust
// standard library inside the archive needs libm, libdl and libpthread.
//
// The repository's own bindings/go has neither file (the archive is built, not committed):
// there, build with a tag (goenv.sh sets agentstate_inrepo); shim.h, seeing
// AGENTSTATE_PREBUILT, says so rather than letting the compiler complain about a missing header.

/*
#cgo CFLAGS: -I${SRCDIR}/include -DAGENTSTATE_PREBUILT
#cgo LDFLAGS: ${SRCDIR}/lib/linux_amd64/libagent_state.a -lm -ldl -lpthread
*/
import "C"
