module agentstate.test/crosslanguage

go 1.19

require github.com/agent-state/agent-state/bindings/go v0.0.0

replace github.com/agent-state/agent-state/bindings/go => ../../../bindings/go
