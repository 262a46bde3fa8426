package doctor

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simtest"
	"github.com/rollboot/rollboot/internal/store"
)

// The broker probe tells the three answers apart: a stream that stays open, a
// 500 "EventBroker not configured" (up to Nomad 1.11.1), and a stream that
// ends at once (from 1.11.2).
func TestBrokerProbe(t *testing.T) {
	for _, tt := range []struct {
		version string
		off     bool
		want    func(error) bool
	}{
		{"1.11.2", false, func(err error) bool { return err == nil }},
		{"1.11.1", true, func(err error) bool {
			return statusOf(err) == http.StatusInternalServerError && strings.Contains(err.Error(), "EventBroker not configured")
		}},
		{"1.11.2", true, func(err error) bool { return errors.Is(err, ErrStreamEnded) }},
	} {
		t.Run(tt.version, func(t *testing.T) {
			_, c := simtest.Start(t, nomadsim.Config{Clients: 1, NomadVersion: tt.version, EventBrokerDisabled: tt.off}, nil)
			err := Nomad{Client: c}.Broker(context.Background(), 200*time.Millisecond)
			if !tt.want(err) {
				t.Fatalf("broker off %v: err = %v", tt.off, err)
			}
			if got := checkBroker(BrokerInput{Err: err}); (got[0].Severity == OK) == tt.off {
				t.Errorf("finding %+v with the broker off = %v", got[0], tt.off)
			}
		})
	}
}

// The Variables' sizes are Nomad's: keys and values summed; the prefix's only.
func TestVariableSizes(t *testing.T) {
	_, c := simtest.Start(t, nomadsim.Config{Clients: 1}, nil)
	big := strings.Repeat("x", 50*1024)
	for path, items := range map[string]api.VariableItems{
		"rollboot/control":  {"paused": big},
		"rollboot/hosts/h1": {"k": "vv"},
		"other/thing":       {"k": big},
	} {
		if _, _, err := c.Variables().Create(&api.Variable{Path: path, Items: items}, nil); err != nil {
			t.Fatal(err)
		}
	}
	src := Nomad{Client: c, Store: store.New(c.Variables(), "rollboot", "")}
	sizes, err := src.VariableSizes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, v := range sizes {
		got[v.Path] = v.Bytes
	}
	if len(got) != 2 || got["rollboot/control"] != len("paused")+len(big) || got["rollboot/hosts/h1"] != 3 {
		t.Fatalf("sizes %v", got)
	}
	fs := checkVariables(VariablesInput{Sizes: sizes}, Options{Namespace: "default", Prefix: "rollboot"})
	if len(fs) != 1 || fs[0].Severity != Warning || fs[0].Subject != "rollboot/control" {
		t.Fatalf("findings %+v: want a warning about rollboot/control", fs)
	}
}

// A token's reads are probed as Nomad decides them: the refused ones are the
// rights it lacks, a Variable that does not exist is no refusal.
func TestProbesWithARestrictedToken(t *testing.T) {
	sim, _ := simtest.Start(t, nomadsim.Config{Clients: 1, ACL: true}, nil)
	p, err := nomadsim.ParsePolicy("p.hcl", []byte(`node {
  policy = "read"
}
namespace "default" {
  variables {
    path "rollboot/*" {
      capabilities = ["read"]
    }
  }
}
`))
	if err != nil {
		t.Fatal(err)
	}
	tok := sim.CreateToken("narrow", p)
	c, err := api.NewClient(&api.Config{Address: sim.Address(), SecretID: tok.SecretID})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	probes := Nomad{Client: c}.Probes(context.Background(), Options{Namespace: "default", Prefix: "rollboot", AgentJob: "rollboot", AgentNamespace: "default"})
	refused := map[string]bool{}
	for _, p := range probes {
		if p.Err != nil {
			if statusOf(p.Err) != http.StatusForbidden {
				t.Errorf("probe %s: %v, want nil or 403", p.Call, p.Err)
			}
			refused[p.Right] = true
		}
	}
	if len(refused) != 2 || !refused["operator:read"] || !refused["read-job in namespace default"] {
		t.Fatalf("refused %v: want operator:read and read-job only", refused)
	}
}
