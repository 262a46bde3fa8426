package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestTelemetryDefaultIsOff(t *testing.T) {
	c := Default()
	if c.Telemetry.Listen != "" {
		t.Fatalf("telemetry.listen default %q, want off", c.Telemetry.Listen)
	}
	if _, err := Compile(c); err != nil {
		t.Fatal(err)
	}
}

func TestTelemetryLoad(t *testing.T) {
	c, err := LoadBytes([]byte("telemetry {\n  listen = \"127.0.0.1:9464\"\n  allowed_hosts = [\"rollboot.service.consul\", \"10.0.0.5\"]\n}\n"), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if c.Telemetry.Listen != "127.0.0.1:9464" || !reflect.DeepEqual(c.Telemetry.AllowedHosts, []string{"rollboot.service.consul", "10.0.0.5"}) {
		t.Fatalf("listen %q, allowed_hosts %q", c.Telemetry.Listen, c.Telemetry.AllowedHosts)
	}
	back, err := LoadBytes([]byte(c.String()), "back.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Telemetry, c.Telemetry) {
		t.Fatalf("rendered and loaded back: %+v, want %+v", back.Telemetry, c.Telemetry)
	}
}

func TestTelemetryErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"no port", "telemetry {\n  listen = \"localhost\"\n}\n", `t.hcl:2:12: telemetry.listen: invalid address "localhost"`},
		{"bad port", "telemetry {\n  listen = \":http\"\n}\n", `t.hcl:2:12: telemetry.listen: invalid port "http"`},
		{"bad host", "telemetry {\n  listen = \"a b:1\"\n}\n", `t.hcl:2:12: telemetry.listen: invalid host "a b"`},
		{"unknown attribute", "telemetry {\n  path = \"/m\"\n}\n", `t.hcl:2:3`},
		{"not a string", "telemetry {\n  listen = 9464\n}\n", `t.hcl:2:12`},
		{"allowed host with a port", "telemetry {\n  allowed_hosts = [\"a.example\", \"b.example:9464\"]\n}\n",
			`t.hcl:2:33: telemetry.allowed_hosts: "b.example:9464" is not a host name`},
		{"allowed host wildcard", "telemetry {\n  allowed_hosts = [\"*.example\"]\n}\n", `t.hcl:2:20: telemetry.allowed_hosts: "*.example" is not a host name`},
		{"allowed hosts not a list", "telemetry {\n  allowed_hosts = \"a.example\"\n}\n", `t.hcl:2:19`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadBytes([]byte(tt.src), "t.hcl")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
