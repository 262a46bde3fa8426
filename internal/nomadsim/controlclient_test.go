package nomadsim

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The control client drives a real emulator over HTTP: each call changes the
// host as the emulator's own method would, and an error answer is a
// *ControlError that says what was refused.
func TestControlClient(t *testing.T) {
	s, err := New(Config{Servers: 1, Clients: 1, BootTime: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := ControlClient{Addr: s.Address() + "/", HTTP: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
	ctx := context.Background()
	host := s.Hosts()[1].Name
	sentinel := filepath.Join(s.Hosts()[1].Dir, SentinelFile)

	hosts, err := c.Hosts(ctx)
	if err != nil || len(hosts) != 2 || hosts[1].Name != host {
		t.Fatalf("hosts %+v, %v", hosts, err)
	}

	st, err := c.SetRebootRequired(ctx, host, "")
	if err != nil || !st.RebootRequired || st.Name != host {
		t.Fatalf("set reboot required: %+v, %v", st, err)
	}
	if b, err := os.ReadFile(sentinel); err != nil || !strings.Contains(string(b), "System restart required") {
		t.Fatalf("sentinel %q, %v", b, err)
	}
	if _, err := c.SetRebootRequired(ctx, host, "kernel 6.12"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(sentinel); string(b) != "kernel 6.12\n" {
		t.Fatalf("sentinel with a reason: %q", b)
	}
	if st, err := c.ClearRebootRequired(ctx, host); err != nil || st.RebootRequired {
		t.Fatalf("clear reboot required: %+v, %v", st, err)
	}
	if _, err := os.Stat(sentinel); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("sentinel still there: %v", err)
	}

	before := hosts[1]
	st, err = c.Reboot(ctx, host)
	if err != nil || st.Up || st.Boots != before.Boots {
		t.Fatalf("reboot: %+v, %v (before %+v)", st, err, before)
	}
	// A host that is down cannot reboot again: the emulator refuses with 400.
	_, err = c.Reboot(ctx, host)
	var ce *ControlError
	if !errors.As(err, &ce) || ce.Code != http.StatusBadRequest || !strings.Contains(ce.Body, "already rebooting") {
		t.Fatalf("second reboot: %v", err)
	}
	want := "POST /sim/v1/hosts/" + host + "/reboot: 400 Bad Request: "
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %q, want prefix %q", err, want)
	}
	// An unknown host is a 404; a name is escaped into the path.
	if _, err := c.SetRebootRequired(ctx, "no such/host", ""); !errors.As(err, &ce) || ce.Code != http.StatusNotFound ||
		ce.Path != "/sim/v1/hosts/no%20such%2Fhost/reboot-required" {
		t.Fatalf("unknown host: %v", err)
	}
	// A cancelled context stops the call.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Hosts(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
