//go:build !agentstate_inrepo && !agentstate_static && (agentstate_pkgconfig || !(linux && amd64))

package agentstate

// With -tags agentstate_pkgconfig, and by default where the module ships no prebuilt archive
// (every platform but linux/amd64, link_prebuilt.go): the installed library, found with
// pkg-config, for distributions that ship the shared library. `make install` puts
// libagent_state.so, agent_state.h and agent_state.pc under PREFIX (/usr/local by default);
// for a prefix pkg-config does not search, set PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig, and let
// the loader find $PREFIX/lib at run time (CGO_LDFLAGS=-Wl,-rpath,$PREFIX/lib, or
// LD_LIBRARY_PATH). The header comes from the installation too, so the package builds from a
// module cache or a vendor directory.

/*
#cgo pkg-config: agent_state
*/
import "C"
