module agentstate

go 1.19
