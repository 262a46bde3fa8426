package fleetlock

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecode: `go test` runs the seed corpus; `go test -fuzz FuzzDecode` explores.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"client_params":{"id":"975228d46dc94622b9bbe16671e2b58d","group":"default"}}`,
		"{\n  \"client_params\": {\n    \"id\": \"975228d46dc94622b9bbe16671e2b58d\",\n    \"group\": \"workers\"\n  }\n}",
		``,
		`null`,
		`{}`,
		`{"client_params":null}`,
		`{"client_params":{"id":"","group":"default"}}`,
		`{"client_params":{"id":"a","group":""}}`,
		`{"client_params":{"id":"a","group":"bad group"}}`,
		`{"client_params":{"id":"a","group":"grüppe"}}`,
		`{"client_params":{"id":"ïd","group":"default"}}`,
		`{"client_params":{"id":123,"group":"default"}}`,
		`{"client_params":{"id":"a","group":["default"]}}`,
		`{"client_params":"x"}`,
		`[1,2,3]`,
		`{"client_params":{"id":"a","group":"default"}} trailing`,
		`{"client_params":{"id":"a","group":"default","extra":true},"more":1}`,
		`{"client_params":{"id":"` + strings.Repeat("a", 100000) + `","group":"default"}}`,
		"\xff\xfe{",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := Decode(body)
		if err != nil {
			if p != (Params{}) {
				t.Fatalf("error %v with params %+v", err, p)
			}
			return
		}
		if p.ID == "" || len(p.ID) > MaxIDLength || !IDRE.MatchString(p.ID) || !GroupRE.MatchString(p.Group) {
			t.Fatalf("accepted invalid params %+v", p)
		}
		if !utf8.ValidString(p.ID) || !utf8.ValidString(p.Group) {
			t.Fatalf("accepted invalid UTF-8 %+v", p)
		}
		// What was accepted encodes back to a body that decodes the same.
		b, _ := json.Marshal(map[string]any{"client_params": map[string]string{"id": p.ID, "group": p.Group}})
		q, err := Decode(b)
		if err != nil || q != p {
			t.Fatalf("round trip of %+v: %+v, %v", p, q, err)
		}
	})
}

func TestDecodeSeeds(t *testing.T) {
	for _, tt := range []struct {
		body string
		ok   bool
	}{
		{`{"client_params":{"id":"abc","group":"default"}}`, true},
		{"{\n  \"client_params\": {\n    \"id\": \"abc\",\n    \"group\": \"a.b-c\"\n  }\n}\n", true},
		{``, false},
		{`{"client_params":{"id":"abc","group":"a_b"}}`, false},
		{`{"client_params":{"id":"a/b","group":"default"}}`, false},
		{`{"client_params":{"id":"abc","group":"default"}}{}`, false},
		{`{"client_params":{"id":true,"group":"default"}}`, false},
	} {
		_, err := Decode([]byte(tt.body))
		if (err == nil) != tt.ok {
			t.Errorf("Decode(%q): err %v, want ok=%v", tt.body, err, tt.ok)
		}
	}
}
