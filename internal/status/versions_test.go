package status

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// During an upgrade the agents run different versions: status says which, and
// how many hosts run each; with one version (or none published) it says nothing.
func TestMixedVersions(t *testing.T) {
	rec := func(host, version string) store.HostRecord {
		return store.HostRecord{Host: host, AgentVersion: version}
	}
	tests := []struct {
		name  string
		hosts []store.HostRecord
		want  []VersionCount
	}{
		{name: "one version", hosts: []store.HostRecord{rec("a", "v1.2.0"), rec("b", "v1.2.0")}},
		{name: "a host without a version does not make it mixed",
			hosts: []store.HostRecord{rec("a", "v1.2.0"), rec("zincati", "")}},
		{
			name:  "an upgrade under way, most hosts first",
			hosts: []store.HostRecord{rec("a", "v1.3.0"), rec("b", "v1.2.0"), rec("c", "v1.2.0"), rec("d", "dev+0123456789ab")},
			want:  []VersionCount{{"v1.2.0", 2}, {"dev+0123456789ab", 1}, {"v1.3.0", 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Build(tt.hosts, nil, store.Control{})
			if !reflect.DeepEqual(v.MixedVersions, tt.want) {
				t.Fatalf("mixed versions %+v, want %+v", v.MixedVersions, tt.want)
			}
			for i, h := range v.Hosts {
				if h.AgentVersion != tt.hosts[i].AgentVersion {
					t.Errorf("host %s shows version %q, its record says %q", h.Host, h.AgentVersion, tt.hosts[i].AgentVersion)
				}
			}
			var text bytes.Buffer
			if err := WriteText(&text, v, time.Now()); err != nil {
				t.Fatal(err)
			}
			shown := strings.Contains(text.String(), "Agents run different versions")
			if shown != (tt.want != nil) {
				t.Fatalf("text shows mixed versions: %v, want %v:\n%s", shown, tt.want != nil, text.String())
			}
			for _, c := range tt.want {
				if !strings.Contains(text.String(), "  "+c.Version+": ") {
					t.Errorf("text does not list %s:\n%s", c.Version, text.String())
				}
			}
			var js bytes.Buffer
			if err := WriteJSON(&js, v); err != nil {
				t.Fatal(err)
			}
			var back View
			if err := json.Unmarshal(js.Bytes(), &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.MixedVersions, tt.want) {
				t.Errorf("-json mixed_versions %+v, want %+v", back.MixedVersions, tt.want)
			}
		})
	}
}
