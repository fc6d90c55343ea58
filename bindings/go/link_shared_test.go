//go:build !agentstate_static

package agentstate

const staticLink = false
