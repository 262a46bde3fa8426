package config

import (
	"strings"
	"testing"
)

// TestHostNameAndAgentJob: host names that do not map one to one to a variable
// path are refused, and the agent job settings are checked.
func TestHostNameAndAgentJob(t *testing.T) {
	tests := []struct {
		name string
		src  string
		msg  string // "" means valid
	}{
		{name: "dotted host name", src: "agent {\n  host = \"web-1.example.com\"\n}"},
		{name: "tilde", src: "agent {\n  host = \"web~1\"\n}", msg: `t.hcl:2:10: agent.host: "web~1" contains "~" or "/"`},
		{name: "slash", src: "agent {\n  host = \"web/1\"\n}", msg: `t.hcl:2:10: agent.host: "web/1" contains "~" or "/"`},
		{name: "agent job off", src: "coordinator {\n  agent_job = \"\"\n}"},
		{name: "agent job with a space", src: "coordinator {\n  agent_job = \"roll boot\"\n}", msg: `coordinator.agent_job: invalid job ID "roll boot"`},
		{name: "agent job namespace", src: "coordinator {\n  agent_job_namespace = \"ops.x\"\n}", msg: `coordinator.agent_job_namespace: invalid namespace "ops.x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadBytes([]byte(tt.src), "t.hcl")
			switch {
			case tt.msg == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.msg != "" && (err == nil || !strings.Contains(err.Error(), tt.msg)):
				t.Errorf("error = %v, want it to contain %q", err, tt.msg)
			}
		})
	}
}
