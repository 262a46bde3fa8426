package config

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/notify"
)

func TestNotifyLoad(t *testing.T) {
	src := `notify {
  urls    = ["generic://alerts.example.com/hook?token=s3cr3t"]
  events  = ["stuck", "reboot_failed"]
  timeout = "5s"
  queue   = 10

  message "stuck" {
    text = "{{.Host}}: {{.Error}}"
  }
}
`
	c, err := LoadBytes([]byte(src), "n.hcl")
	if err != nil {
		t.Fatal(err)
	}
	n := c.Notify
	if len(n.URLs) != 1 || n.URLs[0].Reveal() != "generic://alerts.example.com/hook?token=s3cr3t" || n.Timeout != 5*time.Second ||
		n.Queue != 10 || strings.Join(n.Events, ",") != "stuck,reboot_failed" {
		t.Fatalf("notify %+v", n)
	}
	got, err := c.NotifyMessages.Render(notify.Event{Kind: notify.Stuck, Host: "h1", Error: "gone"})
	if err != nil || got != "h1: gone" {
		t.Errorf("stuck message %q, %v", got, err)
	}
	if got, _ := c.NotifyMessages.Render(notify.Event{Kind: notify.Rebooting, Host: "h1"}); got != "rollboot: h1 is rebooting" {
		t.Errorf("default rebooting message %q", got)
	}
	// The URL is a secret: neither the rendering nor the log value shows it.
	if s := c.String(); strings.Contains(s, "s3cr3t") || !strings.Contains(s, `message "stuck"`) {
		t.Errorf("rendered configuration:\n%s", s)
	}
}

func TestNotifyErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"unknown service", "notify {\n  urls = [\"nosuch://alice:pa55@host/x\"]\n}\n", `n.hcl:2:11: notify.urls[0]: unknown service`},
		{"bad service settings", "notify {\n  urls = [\"generic://ok.example.com/\", \"teams://a@b/c/d/e\"]\n}\n", `n.hcl:2:40: notify.urls[1]: teams: invalid URL format`},
		{"unknown event", "notify {\n  events = [\"stuck\", \"exploded\"]\n}\n", `n.hcl:2:22: notify.events[1]: "exploded" is not an event: use drain_started, rebooting`},
		{"message of an unknown event", "notify {\n  message \"boom\" {\n    text = \"x\"\n  }\n}\n", `n.hcl:2:11: notify.message "boom": "boom" is not an event`},
		{"template syntax", "notify {\n  message \"stuck\" {\n    text = \"{{.Host\"\n  }\n}\n", `n.hcl:3:12: notify.message "stuck".text: template: stuck:1: unclosed action`},
		{"unknown field", "notify {\n  message \"stuck\" {\n    text = \"{{.Hots}}\"\n  }\n}\n", `n.hcl:3:12: notify.message "stuck".text: template: stuck:1:2: executing "stuck" at <.Hots>: can't evaluate field Hots`},
		{"twice", "notify {\n  message \"stuck\" {\n    text = \"a\"\n  }\n  message \"stuck\" {\n    text = \"b\"\n  }\n}\n", `n.hcl:5:11: notify.message "stuck": defined twice (the first is at n.hcl:2:11)`},
		{"no text", "notify {\n  message \"stuck\" {\n  }\n}\n", `n.hcl:2:19`},
		{"timeout", "notify {\n  timeout = \"0s\"\n}\n", `n.hcl:2:13: notify.timeout: must be greater than 0`},
		{"queue", "notify {\n  queue = 0\n}\n", `n.hcl:2:11: notify.queue: must be at least 1, got 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadBytes([]byte(tt.src), "n.hcl")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "pa55") {
				t.Errorf("the error shows the URL's password: %v", err)
			}
		})
	}
}
