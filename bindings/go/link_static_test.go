//go:build agentstate_static || (linux && amd64 && !agentstate_pkgconfig && !agentstate_inrepo)

package agentstate

// Linked with a static archive: the checkout's (agentstate_static) or the prebuilt one of the
// module make dist stages (the default on linux/amd64, link_prebuilt.go).
const staticLink = true
