// Package silence decides which Alertmanager silences should exist while
// hosts are out for their reboot (Desired, pure), and keeps them so through
// Alertmanager's v2 API (Keeper, client.go).
//
// A host's silence is created when its drain starts, extended while the host
// is out (draining, drained, rebooting, rejoining), and ended a tail after it
// is back. Once the host is stuck it is ended at once, so that a real failure
// pages. Every silence also carries Own, so it never covers rollboot's own
// alerts (deploy/prometheus/rollboot.rules.yml).
package silence

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// Matcher is one Alertmanager matcher (alertmanager api/v2/openapi.yaml,
// definition matcher).
type Matcher struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	IsRegex bool   `json:"isRegex"`
	IsEqual bool   `json:"isEqual"`
}

// Own is the matcher every silence carries: it leaves out rollboot's own
// alerts, whose names all start with "Rollboot".
var Own = Matcher{Name: "alertname", Value: "Rollboot.*", IsRegex: true, IsEqual: false}

// String writes m as Alertmanager's matcher syntax (name=~"value").
func (m Matcher) String() string {
	op := map[[2]bool]string{{false, true}: "=", {false, false}: "!=", {true, true}: "=~", {true, false}: "!~"}[[2]bool{m.IsRegex, m.IsEqual}]
	return m.Name + op + strconv.Quote(m.Value)
}

// matches reports whether m matches a label of value v (Alertmanager anchors
// regular expressions: pkg/labels/matcher.go NewMatcher).
func (m Matcher) matches(v string) bool {
	if !m.IsRegex {
		return (v == m.Value) == m.IsEqual
	}
	re, err := regexp.Compile("^(?:" + m.Value + ")$")
	if err != nil {
		return false
	}
	return re.MatchString(v) == m.IsEqual
}

// Vars are what a matcher template may use.
type Vars struct {
	Host      string // the host's name
	HostRegex string // the same, quoted for a regular expression
	Group     string // its rollboot group
}

// sample is the host the templates are tried with when they are checked.
var sample = Vars{Host: "host-1", HostRegex: regexp.QuoteMeta("host-1"), Group: "group-1"}

// Template is one matcher template of the policy: a matcher in Alertmanager's
// syntax (`instance=~"{{.Host}}.*"`) with text/template actions over Vars.
type Template struct {
	src string
	t   *template.Template
}

// ParseTemplate parses a matcher template and checks it renders to a matcher.
func ParseTemplate(src string) (Template, error) {
	t, err := template.New("matcher").Option("missingkey=error").Parse(src)
	if err != nil {
		return Template{}, fmt.Errorf("invalid template: %v", strings.TrimPrefix(err.Error(), "template: "))
	}
	tp := Template{src: src, t: t}
	if _, err := tp.Render(sample); err != nil {
		return Template{}, err
	}
	return tp, nil
}

// String is the template as written.
func (tp Template) String() string { return tp.src }

// Render renders the template for a host and parses the matcher.
func (tp Template) Render(v Vars) (Matcher, error) {
	var b strings.Builder
	if err := tp.t.Execute(&b, v); err != nil {
		return Matcher{}, fmt.Errorf("invalid template (it may use {{.Host}}, {{.HostRegex}} and {{.Group}}): %v", strings.TrimPrefix(err.Error(), "template: "))
	}
	return ParseMatcher(b.String())
}

var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*`)

// ParseMatcher parses one matcher: a label name, one of = != =~ !~, and a
// value, in double quotes or bare (Alertmanager's matcher syntax,
// pkg/labels/parse.go ParseMatcher). A regular expression must compile.
func ParseMatcher(s string) (Matcher, error) {
	s = strings.TrimSpace(s)
	name := labelName.FindString(s)
	if name == "" {
		return Matcher{}, fmt.Errorf("%q is not a matcher: want a label name, an operator (= != =~ !~) and a value, such as instance=~\"web-1.*\"", s)
	}
	rest := strings.TrimLeft(s[len(name):], " ")
	m := Matcher{Name: name}
	switch {
	case strings.HasPrefix(rest, "=~"):
		m.IsRegex, m.IsEqual, rest = true, true, rest[2:]
	case strings.HasPrefix(rest, "!~"):
		m.IsRegex, rest = true, rest[2:]
	case strings.HasPrefix(rest, "!="):
		rest = rest[2:]
	case strings.HasPrefix(rest, "="):
		m.IsEqual, rest = true, rest[1:]
	default:
		return Matcher{}, fmt.Errorf("%q has no operator after %q: use one of = != =~ !~", s, name)
	}
	v, err := unquote(strings.TrimSpace(rest))
	if err != nil {
		return Matcher{}, fmt.Errorf("%q: %v", s, err)
	}
	rest = v
	m.Value = rest
	if m.IsRegex {
		if _, err := regexp.Compile("^(?:" + m.Value + ")$"); err != nil {
			return Matcher{}, fmt.Errorf("%q: invalid regular expression: %v", s, err)
		}
	}
	return m, nil
}

// unquote reads a matcher's value as Alertmanager does (pkg/labels/parse.go
// ParseMatcher): in double quotes or bare; \n, \" and \\ are escapes, a
// backslash before anything else is itself (so `web\.1` stays a regular
// expression's escaped dot), and a double quote inside must be escaped.
func unquote(raw string) (string, error) {
	quoted := strings.HasPrefix(raw, `"`)
	if quoted {
		raw = raw[1:]
	}
	var b strings.Builder
	closed := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '\\' && i+1 < len(raw):
			i++
			switch raw[i] {
			case 'n':
				b.WriteByte('\n')
			case '"', '\\':
				b.WriteByte(raw[i])
			default:
				b.WriteByte('\\')
				b.WriteByte(raw[i])
			}
		case c == '"' && quoted && i == len(raw)-1:
			closed = true
		case c == '"':
			return "", fmt.Errorf("the value has an unescaped double quote")
		default:
			b.WriteByte(c)
		}
	}
	if quoted && !closed {
		return "", fmt.Errorf("the value's quotes do not close")
	}
	return b.String(), nil
}

// Rules are a group's silence settings (the policy's silence block).
type Rules struct {
	// Matchers are the templates of a host's silence; none: no silence.
	Matchers []Template
	// Duration is how long a silence lasts from its creation or extension;
	// it is extended once less than half of it is left.
	Duration time.Duration
	// Tail is how long a silence lasts after its host is back.
	Tail time.Duration
}

// Matchers renders the templates for a host, with Own after them.
func (r Rules) render(v Vars) ([]Matcher, error) {
	out := make([]Matcher, 0, len(r.Matchers)+1)
	for _, tp := range r.Matchers {
		m, err := tp.Render(v)
		if err != nil {
			return nil, fmt.Errorf("matcher %q for host %s: %w", tp.src, v.Host, err)
		}
		out = append(out, m)
	}
	if !anyNonEmpty(out) {
		return nil, fmt.Errorf("matchers %s for host %s: every matcher matches an empty label, so the silence would match every alert (Alertmanager refuses it)", joinMatchers(out), v.Host)
	}
	return append(out, Own), nil
}

// CheckMatchers checks a list of templates as the policy gives it: each
// parses, and together they select something (one of them does not match an
// empty label, as Alertmanager demands of a silence).
func CheckMatchers(srcs []string) ([]Template, error) {
	var (
		out  []Template
		errs []error
	)
	for _, s := range srcs {
		tp, err := ParseTemplate(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, tp)
	}
	if len(errs) > 0 || len(out) == 0 {
		return out, errors.Join(errs...)
	}
	_, err := Rules{Matchers: out}.render(sample)
	return out, err
}

func anyNonEmpty(ms []Matcher) bool {
	for _, m := range ms {
		if !m.matches("") {
			return true
		}
	}
	return false
}

func joinMatchers(ms []Matcher) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = m.String()
	}
	return "{" + strings.Join(s, ", ") + "}"
}
