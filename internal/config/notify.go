package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/rollboot/rollboot/internal/notify"
)

// NotifyConfig configures the notifications the leading coordinator sends
// (docs/notifications.md). It belongs in the local file of the coordinator
// candidates, never in state every agent can read: its URLs carry credentials.
type NotifyConfig struct {
	// URLs are shoutrrr service URLs (slack://, teams://, matrix://, smtp://,
	// generic://, ...). Secrets: they never print.
	URLs []Secret
	// Events are the kinds sent (notify.Kinds); empty: all of them.
	Events []string
	// Timeout bounds one send to one URL.
	Timeout time.Duration
	// Queue is how many events may wait to be sent.
	Queue int
	// Messages are text/template templates by event kind, over
	// notify.DefaultMessages.
	Messages map[string]string
}

// notifyTable is the notify block; with no URL (the default) nothing is sent.
var notifyTable = &table{typ: "notify", of: reflect.TypeFor[NotifyConfig](), settings: []setting{
	{name: "urls", field: "URLs", check: each(atElementIndexed, notifyURL),
		doc: "shoutrrr URLs (`slack://`, `teams://`, `matrix://`, `smtp://`, `generic://`, ...). None: " +
			"nothing is sent. Secrets: printed as `<redacted>`, never quoted in an error."},
	{name: "events", field: "Events", defDoc: "every event", check: each(atElementIndexed, eventKind),
		doc: "The events sent: " + eventKindsDoc() + " ([notifications](notifications.md#events))."},
	{name: "timeout", field: "Timeout", def: 10 * time.Second, check: value(positive),
		doc: "Bound of one send to one URL. > 0."},
	{name: "queue", field: "Queue", def: 100, check: value(atLeast(1, "")),
		doc: "Events that may wait to be sent; more wait for a later pass. At least 1."},
}, nested: []nested{messageBlocks{}}}

// notifyURL checks an element of notify.urls, never quoting it.
func notifyURL(u Secret) error { return notify.CheckURL(u.Reveal()) }

// eventKind checks an event kind of notify.events.
func eventKind(e string) error {
	if !notify.ValidKind(e) {
		return fmt.Errorf("%q is not an event: use %s", e, eventKinds())
	}
	return nil
}

func eventKinds() string {
	kinds := make([]string, len(notify.Kinds))
	for i, k := range notify.Kinds {
		kinds[i] = string(k)
	}
	return strings.Join(kinds, ", ")
}

// eventKindsDoc lists every event kind for the docs, each in backquotes.
func eventKindsDoc() string {
	kinds := make([]string, len(notify.Kinds))
	for i, k := range notify.Kinds {
		kinds[i] = "`" + string(k) + "`"
	}
	return strings.Join(kinds, ", ")
}

// messageBlocks are the notify block's `message "<event>" { text = "..." }`
// blocks, into NotifyConfig.Messages.
type messageBlocks struct{}

func messageScope(kind string) scope {
	return scope{"notify.message." + kind, fmt.Sprintf("notify.message %q", kind)}
}

func (messageBlocks) header() hcl.BlockHeaderSchema {
	return hcl.BlockHeaderSchema{Type: "message", LabelNames: []string{"event"}}
}

func (messageBlocks) fill(outer reflect.Value, _ *Config) { fieldOf(outer, "Messages").SetZero() }

func (messageBlocks) decode(d *decoder, blocks hcl.Blocks, _ scope, outer reflect.Value) {
	n := outer.Addr().Interface().(*NotifyConfig)
	for _, b := range blocks {
		if b.Type != "message" {
			continue
		}
		kind := b.Labels[0]
		ms := messageScope(kind)
		if _, dup := n.Messages[kind]; dup {
			d.errorf(b.LabelRanges[0], "%s: defined twice (the first is at %s)", ms.name, rangeString(d.c.pos[ms.key]))
			continue
		}
		d.c.setPos(ms.key, b.LabelRanges[0])
		mc := d.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "text", Required: true}}})
		if mc == nil || mc.Attributes["text"] == nil {
			continue
		}
		var text string
		d.setting(mc.Attributes["text"], ms.sub("text"), reflect.ValueOf(&text).Elem())
		if d.c.bad[ms.sub("text").key] {
			continue
		}
		if n.Messages == nil {
			n.Messages = map[string]string{}
		}
		n.Messages[kind] = text
	}
}

// check checks each message: of an event, a template over its fields.
func (messageBlocks) check(v *validator, _ scope, outer reflect.Value) {
	messages := outer.Interface().(NotifyConfig).Messages
	for _, kind := range sortedKeys(messages) {
		ms := messageScope(kind)
		if !notify.ValidKind(kind) {
			v.errorf(ms, "%q is not an event: use %s", kind, eventKinds())
			continue
		}
		if _, err := notify.CompileMessage(notify.Kind(kind), messages[kind]); err != nil {
			v.errorf(ms.sub("text"), "%v (the fields are those of notify.Event: .Host, .Group, .Grant, .Reason, .Error, .Attempt, .PauseReason, .At, .Duration)", err)
		}
	}
}

func (messageBlocks) render(body *hclwrite.Body, outer reflect.Value) {
	messages := outer.Interface().(NotifyConfig).Messages
	for _, kind := range sortedKeys(messages) {
		body.AppendNewBlock("message", []string{kind}).Body().SetAttributeValue("text", cty.StringVal(messages[kind]))
	}
}

func (messageBlocks) docRow() []string {
	return []string{"`message \"<event>\" { text = \"...\" }`", "the defaults",
		"The message of an event: a Go `text/template` over the event's fields (`.Kind`, `.Host`, `.Group`, " +
			"`.Grant`, `.Reason`, `.Error`, `.Attempt`, `.PauseReason`, `.At`, `.Duration`, `.Freeze`, `.Until`). Checked when the " +
			"configuration is loaded."}
}

// messages compiles the notify block's message templates, checked, over the
// defaults.
func (n NotifyConfig) messages() notify.Messages {
	given := map[notify.Kind]string{}
	for kind, text := range n.Messages {
		given[notify.Kind(kind)] = text
	}
	m, err := notify.CompileMessages(given)
	if err != nil {
		return nil // Compile reported it
	}
	return m
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
