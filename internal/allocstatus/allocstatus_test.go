package allocstatus

import (
	"testing"

	"github.com/hashicorp/nomad/api"
)

func TestStatuses(t *testing.T) {
	for _, tt := range []struct {
		desired, client          string
		clientTerminal, terminal bool
	}{
		{api.AllocDesiredStatusRun, api.AllocClientStatusRunning, false, false},
		{api.AllocDesiredStatusRun, api.AllocClientStatusPending, false, false},
		{api.AllocDesiredStatusStop, api.AllocClientStatusRunning, false, true},
		{api.AllocDesiredStatusEvict, api.AllocClientStatusRunning, false, true},
		{api.AllocDesiredStatusRun, api.AllocClientStatusComplete, true, true},
		{api.AllocDesiredStatusRun, api.AllocClientStatusFailed, true, true},
		{api.AllocDesiredStatusStop, api.AllocClientStatusLost, true, true},
	} {
		if got := ClientTerminal(tt.client); got != tt.clientTerminal {
			t.Errorf("%s/%s: ClientTerminal = %v, want %v", tt.desired, tt.client, got, tt.clientTerminal)
		}
		if got := Terminal(tt.desired, tt.client); got != tt.terminal {
			t.Errorf("%s/%s: Terminal = %v, want %v", tt.desired, tt.client, got, tt.terminal)
		}
	}
}
