module github.com/agent-state/agent-state/bindings/go

go 1.19
