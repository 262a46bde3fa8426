package notify

import (
	"bytes"
	"fmt"
	"text/template"
	"time"
)

// DefaultMessages are the message templates used for the events that the
// configuration gives no template for. They are text/template templates
// executed with an Event.
var DefaultMessages = map[Kind]string{
	DrainStarted:  `rollboot: draining {{.Host}} (group {{.Group}}) to reboot it: {{.Reason}}`,
	Rebooting:     `rollboot: {{.Host}} is rebooting`,
	BackInService: `rollboot: {{.Host}} rebooted and is back in service{{if .Duration}} after {{.Duration}}{{end}}{{with .Error}}, but its workloads were still unhealthy at its healthy deadline: {{.}}{{end}}`,
	Stuck:         `rollboot: {{.Host}} is stuck: {{.Error}} (rollboot release {{.Host}} frees its slot)`,
	DrainAborted:  `rollboot: drain of {{.Host}} aborted, retrying after a backoff: {{.Error}}`,
	RebootFailed:  `rollboot: reboot of {{.Host}} failed, retrying after a backoff: {{.Error}}`,
	NodeGone:      `rollboot: {{.Host}}'s slot was released: {{.Error}} (rollboot forget {{.Host}} removes a host gone for good)`,
	Paused:        `rollboot: rollout paused{{with .PauseReason}}: {{.}}{{end}}`,
	Resumed:       `rollboot: rollout resumed`,

	// A group's approval (package admission, approval.go).
	AwaitingApproval: `rollboot: {{.Host}} (group {{.Group}}) awaits approval to reboot ({{.Reason}}): {{.Error}}`,

	// A failure budget's halt (package policy, halt.go).
	Halted: `rollboot: {{.Error}}`,

	// A freeze of the policy (package policy, freeze.go).
	Frozen:      `rollboot: freeze {{.Freeze}} in force until {{.Until.UTC.Format "2006-01-02 15:04 MST"}}: no drain starts in it (groups: {{.Group}})`,
	FreezeEnded: `rollboot: freeze {{.Freeze}} ended: drains may start again in its groups ({{.Group}})`,
}

// Messages are the compiled message template of every event kind.
type Messages map[Kind]*template.Template

// sample is an event with every field set, executed by Compile to find
// templates that name a field that does not exist.
var sample = Event{Kind: Stuck, Host: "host", Group: "group", Grant: "grant", Reason: "reason",
	Error: "error", Attempt: 1, PauseReason: "pause reason", At: time.Unix(0, 0).UTC(), Duration: time.Minute,
	Freeze: "freeze", Until: time.Unix(0, 0).UTC()}

// CompileMessage parses one message template and runs it once on a sample
// event, so that a syntax error or a field that Event does not have is found
// when the configuration is checked, not when the event happens.
func CompileMessage(kind Kind, text string) (*template.Template, error) {
	t, err := template.New(string(kind)).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	if err := t.Execute(&bytes.Buffer{}, sample); err != nil {
		return nil, err
	}
	return t, nil
}

// CompileMessages compiles the templates given (by kind) over the defaults.
func CompileMessages(given map[Kind]string) (Messages, error) {
	m := Messages{}
	for _, k := range Kinds {
		text, ok := given[k]
		if !ok {
			text = DefaultMessages[k]
		}
		t, err := CompileMessage(k, text)
		if err != nil {
			return nil, fmt.Errorf("message %s: %w", k, err)
		}
		m[k] = t
	}
	return m, nil
}

// Render returns the message for e. The template is executed with e's text
// values made inert in chat markup (markup.go): the template's own markup
// works, none of a value's does.
func (m Messages) Render(e Event) (string, error) {
	t, ok := m[e.Kind]
	if !ok {
		return "", fmt.Errorf("no message template for %s", e.Kind)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, e.inert()); err != nil {
		return "", err
	}
	return b.String(), nil
}
