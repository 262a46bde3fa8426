package notify

import (
	"reflect"
	"strings"
	"testing"
)

func TestInertText(t *testing.T) {
	const zw = "\u200b"
	tests := []struct {
		name, in, want string
	}{
		{"clean", "sentinel file /var/run/reboot-required", "sentinel file /var/run/reboot-required"},
		{"the issue's reason", "<!channel> *boom* @everyone `x`", "‹!channel› ∗boom∗ @" + zw + "everyone ˋxˋ"},
		{"Slack link and mention", "<http://evil.example|click> <@U123> <#C1>", "‹http://evil.exampleǀclick› ‹@" + zw + "U123› ‹#C1›"},
		{"plain mentions", "@here @channel @all @user.name", "@" + zw + "here @" + zw + "channel @" + zw + "all @" + zw + "user.name"},
		{"an @ alone", "a @ b, a@", "a @ b, a@"},
		{"Markdown styles", "_it_ __b__ ~s~ ~~s~~ ||hidden|| **b**", "ˍitˍ ˍˍbˍˍ ∼s∼ ∼∼s∼∼ ǀǀhiddenǀǀ ∗∗b∗∗"},
		{"an underscore inside a word", "job my_job/reboot_required", "job my_job/reboot_required"},
		{"an underscore at a word's edge", "_x x_ (_y_)", "ˍx xˍ (ˍyˍ)"},
		{"Markdown link", "[docs](http://evil.example)", "[docs]" + zw + "(http://evil.example)"},
		{"a Markdown quote or code block on a new line", "ok\n> quoted\n```\ncode", "ok › quoted ˋˋˋ code"},
		{"brackets alone", "web.web[0] unhealthy (exit 1)", "web.web[0] unhealthy (exit 1)"},
		{"control characters", "\x1b[31mred\x1b[0m", "red"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := inertText(tt.in); got != tt.want {
				t.Errorf("inertText(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

// The operator's template keeps its markup; the values put in it lose theirs.
func TestRenderValuesInert(t *testing.T) {
	m, err := CompileMessages(map[Kind]string{DrainStarted: "<!here> *{{.Host}}* drains: {{.Reason}}"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Render(Event{Kind: DrainStarted, Host: "web-1", Reason: "<!channel> *boom* @everyone `x`"})
	if want := "<!here> *web-1* drains: ‹!channel› ∗boom∗ @\u200beveryone ˋxˋ"; err != nil || got != want {
		t.Errorf("got %q, %v\nwant %q", got, err, want)
	}
}

// Every text value of an event reaches a template inert: a text field added to
// Event later fails this test until inert covers it.
func TestEveryEventTextInert(t *testing.T) {
	typ := reflect.TypeOf(Event{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type.Kind() != reflect.String || f.Name == "Kind" {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			m, err := CompileMessages(map[Kind]string{Stuck: "{{." + f.Name + "}}"})
			if err != nil {
				t.Fatal(err)
			}
			e := Event{Kind: Stuck}
			reflect.ValueOf(&e).Elem().Field(i).SetString("<!channel> @everyone *x*\nline")
			got, err := m.Render(e)
			if err != nil {
				t.Fatal(err)
			}
			if strings.ContainsAny(got, "<>*\n") || strings.Contains(got, "@everyone") {
				t.Errorf("%s rendered as %q", f.Name, got)
			}
		})
	}
}
