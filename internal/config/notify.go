package config

import (
	"fmt"
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

// defaultNotify is the notify block's defaults: no URL, so nothing is sent.
func defaultNotify() NotifyConfig {
	return NotifyConfig{Timeout: 10 * time.Second, Queue: 100}
}

// notify decodes the notify block.
func (d *decoder) notify(body hcl.Body) {
	content := d.content(body, &hcl.BodySchema{
		Attributes: attrSchema("urls", "events", "timeout", "queue"),
		Blocks:     []hcl.BlockHeaderSchema{{Type: "message", LabelNames: []string{"event"}}},
	})
	if content == nil {
		return
	}
	n, a, s := &d.c.Notify, content.Attributes, scope{"notify", "notify"}
	var urls []string
	d.strList(a, s, "urls", &urls)
	n.URLs = nil
	for _, u := range urls {
		n.URLs = append(n.URLs, Secret(u))
	}
	d.strList(a, s, "events", &n.Events)
	d.duration(a, s, "timeout", &n.Timeout)
	d.integer(a, s, "queue", &n.Queue)
	for _, b := range content.Blocks {
		kind := b.Labels[0]
		ms := scope{"notify.message." + kind, fmt.Sprintf("notify.message %q", kind)}
		if _, dup := n.Messages[kind]; dup {
			d.errorf(b.LabelRanges[0], "%s: defined twice (the first is at %s)", ms.name, rangeString(d.c.pos[ms.key]))
			continue
		}
		d.c.setPos(ms.key, b.LabelRanges[0])
		mc := d.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "text", Required: true}}})
		if mc == nil {
			continue
		}
		var text string
		if d.str(mc.Attributes, ms, "text", &text) {
			if n.Messages == nil {
				n.Messages = map[string]string{}
			}
			n.Messages[kind] = text
		}
	}
}

// notify checks the notify block and compiles its message templates.
func (v *validator) notify() notify.Messages {
	n, s := &v.c.Notify, scope{"notify", "notify"}
	for i, u := range n.URLs {
		if err := notify.CheckURL(u.Reveal()); err != nil {
			v.errorAt(fmt.Sprintf("notify.urls.%d", i), fmt.Sprintf("notify.urls[%d]", i), "%v", err)
		}
	}
	kinds := make([]string, len(notify.Kinds))
	for i, k := range notify.Kinds {
		kinds[i] = string(k)
	}
	for i, e := range n.Events {
		if !notify.ValidKind(e) {
			v.errorAt(fmt.Sprintf("notify.events.%d", i), fmt.Sprintf("notify.events[%d]", i),
				"%q is not an event: use %s", e, strings.Join(kinds, ", "))
		}
	}
	v.positive(s.sub("timeout"), n.Timeout)
	if k := s.sub("queue"); n.Queue < 1 && v.good(k) {
		v.errorf(k, "must be at least 1, got %d", n.Queue)
	}
	given := map[notify.Kind]string{}
	for _, kind := range sortedKeys(n.Messages) {
		ms := scope{"notify.message." + kind, fmt.Sprintf("notify.message %q", kind)}
		if !notify.ValidKind(kind) {
			v.errorf(ms, "%q is not an event: use %s", kind, strings.Join(kinds, ", "))
			continue
		}
		if _, err := notify.CompileMessage(notify.Kind(kind), n.Messages[kind]); err != nil {
			v.errorf(ms.sub("text"), "%v (the fields are those of notify.Event: .Host, .Group, .Grant, .Reason, .Error, .Attempt, .PauseReason, .At, .Duration)", err)
			continue
		}
		given[notify.Kind(kind)] = n.Messages[kind]
	}
	m, err := notify.CompileMessages(given)
	if err != nil {
		return nil // reported above
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

// writeNotify renders the notify block, its URLs masked.
func (c *Config) writeNotify(root *hclwrite.Body) {
	b := root.AppendNewBlock("notify", nil).Body()
	urls := make([]string, len(c.Notify.URLs))
	for i, u := range c.Notify.URLs {
		urls[i] = u.String()
	}
	b.SetAttributeValue("urls", strList(urls))
	b.SetAttributeValue("events", strList(c.Notify.Events))
	b.SetAttributeValue("timeout", durationVal(c.Notify.Timeout))
	b.SetAttributeValue("queue", cty.NumberIntVal(int64(c.Notify.Queue)))
	for _, kind := range sortedKeys(c.Notify.Messages) {
		b.AppendNewBlock("message", []string{kind}).Body().SetAttributeValue("text", cty.StringVal(c.Notify.Messages[kind]))
	}
}
