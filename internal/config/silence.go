package config

import (
	"errors"
	"reflect"
	"time"

	"github.com/rollboot/rollboot/internal/silence"
)

// SilenceConfig is a silence block: the Alertmanager silence each host gets
// while it is out for its reboot (package silence).
type SilenceConfig struct {
	// Matchers are the silence's matcher templates; none: no silence.
	Matchers []string
	// Duration is how long a silence lasts from its creation or extension.
	Duration time.Duration
	// Tail is how long it lasts after its host is back.
	Tail time.Duration
}

// silenceTable is the silence block, at the top level and in a group (whose
// values are the top-level one's unless it sets them).
var silenceTable = &table{typ: "silence", of: reflect.TypeFor[SilenceConfig](), settings: []setting{
	{name: "matchers", field: "Matchers", check: value(silenceMatchers),
		doc: "Matchers of the silence a host gets while it is out for its reboot, in Alertmanager's syntax " +
			"(`name=\"value\"`, `name!=\"value\"`, `name=~\"regex\"`, `name!~\"regex\"`), each a " +
			"[text/template](https://pkg.go.dev/text/template) with `{{.Host}}` (the host's name), " +
			"`{{.HostRegex}}` (the same, quoted for a regular expression) and `{{.Group}}`: " +
			"`[\"instance=~\\\"{{.HostRegex}}(:.*)?\\\"\"]`. The silence is created in the Alertmanager of " +
			"`alerts.alertmanager_url` when the host's drain starts, extended while the host is out " +
			"(draining, drained, rebooting, rejoining), ended `tail` after it is back, and ended at once when " +
			"the host turns `stuck` (never extended then, so a real failure pages). Every silence also gets " +
			"`alertname!~\"Rollboot.*\"`, so it never covers rollboot's own alerts. Its ID is kept in " +
			"rollboot's state (`<prefix>/silences`), so a new leader carries on with it. A write that fails " +
			"(Alertmanager unreachable, a matcher it refuses) never holds the rollout: it is logged, counted " +
			"in `rollboot_silence_write_failures_total{op}`, shown by `rollboot status` (Silences) and tried " +
			"again every 15s. Each must parse with a sample host, and one of them must not match an empty " +
			"label (Alertmanager refuses a silence that would match every alert). Needs " +
			"`alerts.alertmanager_url`. `[]`: no silences."},
	{name: "duration", field: "Duration", def: 30 * time.Minute, check: value(positive),
		doc: "How long a silence lasts from its creation or its last extension; it is extended while its " +
			"host is out once less than half is left. If the coordinators stop, the silence runs out at " +
			"most this long after. > 0."},
	{name: "tail", field: "Tail", def: 5 * time.Minute, check: value(nonNegative),
		doc: "How long the silence lasts after its host is back (its cycle ended): alerts that resolve a " +
			"little after the host's workloads are healthy again do not page. >= 0."},
}}

// silenceMatchers checks a matchers list.
func silenceMatchers(ms []string) error {
	var errs []error
	for i, m := range ms {
		if _, err := silence.ParseTemplate(m); err != nil {
			errs = append(errs, elem(i, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	_, err := silence.CheckMatchers(ms)
	return err
}

// Rules compiles a silence block, checked.
func (sc SilenceConfig) Rules() silence.Rules {
	tps, _ := silence.CheckMatchers(sc.Matchers)
	return silence.Rules{Matchers: tps, Duration: sc.Duration, Tail: sc.Tail}
}

// silences checks that silences have an Alertmanager to be written to.
func (v *validator) silences() {
	if v.c.Alerts.AlertmanagerURL != "" {
		return
	}
	const msg = "silences are written to the Alertmanager of alerts.alertmanager_url, which is not set: set it, or remove the matchers"
	if len(v.c.Silence.Matchers) > 0 && v.good(scope{"silence.matchers", "silence.matchers"}) {
		v.errorf(scope{"silence.matchers", "silence.matchers"}, msg)
	}
	for i, g := range v.c.Groups {
		key := labelScope("group", i, g.Name).sub("silence").sub("matchers")
		if len(g.Silence.Matchers) > 0 && v.written(key) && v.good(key) {
			v.errorf(key, msg)
		}
	}
}
