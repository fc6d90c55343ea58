//go:build !agentstate_inrepo && !agentstate_static

package agentstate

// By default: the installed library, found with pkg-config. `make install` puts
// libagent_state.so, agent_state.h and agent_state.pc under PREFIX (/usr/local by default);
// for a prefix pkg-config does not search, set PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig, and let
// the loader find $PREFIX/lib at run time (CGO_LDFLAGS=-Wl,-rpath,$PREFIX/lib, or
// LD_LIBRARY_PATH). The header comes from the installation too, so the package builds from a
// module cache or a vendor directory.

/*
#cgo pkg-config: agent_state
*/
import "C"
