//go:build !agentstate_static && (agentstate_inrepo || agentstate_pkgconfig || !(linux && amd64))

package agentstate

const staticLink = false
