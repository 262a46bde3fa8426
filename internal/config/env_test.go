package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestApplyEnv(t *testing.T) {
	allEnv := map[string]string{
		"NOMAD_ADDR":            "https://env:4646",
		"NOMAD_TOKEN":           "env-token",
		"NOMAD_REGION":          "env-region",
		"NOMAD_NAMESPACE":       "env-ns",
		"NOMAD_CACERT":          "/env/ca.pem",
		"NOMAD_CLIENT_CERT":     "/env/cert.pem",
		"NOMAD_CLIENT_KEY":      "/env/key.pem",
		"NOMAD_TLS_SERVER_NAME": "server.env.nomad",
		"NOMAD_SKIP_VERIFY":     "true",
	}
	fromEnv := NomadConfig{
		Address: "https://env:4646", Token: "env-token", Region: "env-region", Namespace: "env-ns",
		CACert: "/env/ca.pem", ClientCert: "/env/cert.pem", ClientKey: "/env/key.pem",
		TLSServerName: "server.env.nomad", TLSSkipVerify: true,
	}
	fullFile := `nomad {
  address         = "http://file:4646"
  token           = "file-token"
  region          = "file-region"
  namespace       = "file-ns"
  ca_cert         = "/file/ca.pem"
  client_cert     = "/file/cert.pem"
  client_key      = "/file/key.pem"
  tls_server_name = "server.file.nomad"
  tls_skip_verify = false
}`
	fromFile := NomadConfig{
		Address: "http://file:4646", Token: "file-token", Region: "file-region", Namespace: "file-ns",
		CACert: "/file/ca.pem", ClientCert: "/file/cert.pem", ClientKey: "/file/key.pem",
		TLSServerName: "server.file.nomad", TLSSkipVerify: false,
	}

	tests := []struct {
		name    string
		file    string // "" = Default()
		env     map[string]string
		want    NomadConfig
		wantErr string
	}{
		{name: "env fills the defaults", env: allEnv, want: fromEnv},
		{name: "env fills an empty file", file: "drain {}", env: allEnv, want: fromEnv},
		{name: "file wins over env", file: fullFile, env: allEnv, want: fromFile},
		{name: "no env keeps the defaults", env: nil, want: Default().Nomad},
		{name: "empty variables are ignored", env: map[string]string{"NOMAD_ADDR": "", "NOMAD_NAMESPACE": ""}, want: Default().Nomad},
		{name: "partly from file", file: "nomad {\n  address = \"http://file:4646\"\n}",
			env:  map[string]string{"NOMAD_ADDR": "http://env:4646", "NOMAD_TOKEN": "t", "NOMAD_SKIP_VERIFY": "0"},
			want: NomadConfig{Address: "http://file:4646", Token: "t", Namespace: "default"}},
		{name: "skip verify must be a boolean", env: map[string]string{"NOMAD_SKIP_VERIFY": "maybe"},
			wantErr: `$NOMAD_SKIP_VERIFY: nomad.tls_skip_verify: invalid boolean "maybe"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			if tt.file != "" {
				var err error
				if c, err = ParseBytes([]byte(tt.file), "t.hcl"); err != nil {
					t.Fatal(err)
				}
			}
			getenv := func(k string) string { return tt.env[k] }
			err := c.ApplyEnv(getenv)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("ApplyEnv error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Nomad != tt.want {
				t.Errorf("nomad =\n%#v\nwant\n%#v", c.Nomad, tt.want)
			}
			if c.Nomad.Token.Reveal() != tt.want.Token.Reveal() {
				t.Errorf("token %q, want %q", c.Nomad.Token.Reveal(), tt.want.Token.Reveal())
			}
		})
	}
}

func TestApplyEnvErrorsNameTheVariable(t *testing.T) {
	c := Default()
	env := map[string]string{"NOMAD_ADDR": "nomad.example:4646", "NOMAD_NAMESPACE": "*"}
	if err := c.ApplyEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	_, err := Compile(c)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"$NOMAD_ADDR: nomad.address:", "$NOMAD_NAMESPACE: nomad.namespace:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	// ApplyEnv again: values from the environment are not "from the file".
	env["NOMAD_ADDR"] = "http://fixed:4646"
	env["NOMAD_NAMESPACE"] = "ok"
	if err := c.ApplyEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(c); err != nil {
		t.Errorf("after fixing the environment: %v", err)
	}
}

const secretToken = "s3cr3t-0b4e9d7a-token"

func TestTokenNeverPrinted(t *testing.T) {
	c, err := LoadBytes([]byte(`nomad {
  token = "`+secretToken+`"
}`), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if c.Nomad.Token.Reveal() != secretToken || c.Nomad.APIConfig().SecretID != secretToken {
		t.Fatal("token not loaded")
	}

	var outputs []string
	outputs = append(outputs,
		c.String(),
		fmt.Sprint(c), fmt.Sprintf("%v", *c), fmt.Sprintf("%+v", *c), fmt.Sprintf("%#v", *c),
		fmt.Sprintf("%v %+v %#v %s %q", c.Nomad, c.Nomad, c.Nomad, c.Nomad.Token, c.Nomad.Token),
		fmt.Sprintf("%+v", &c.Nomad),
	)
	for _, h := range []func(*bytes.Buffer) slog.Handler{
		func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var buf bytes.Buffer
		log := slog.New(h(&buf))
		log.Info("config", "config", c, "nomad", c.Nomad, "token", c.Nomad.Token)
		outputs = append(outputs, buf.String())
	}
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	outputs = append(outputs, string(js))

	for i, out := range outputs {
		if strings.Contains(out, secretToken) {
			t.Errorf("output %d shows the token:\n%s", i, out)
		}
	}
	if !strings.Contains(c.String(), `token           = "<redacted>"`) {
		t.Errorf("String() does not say a token is set:\n%s", c)
	}
	if !strings.Contains(outputs[len(outputs)-2], `"token":"<redacted>"`) {
		t.Errorf("slog JSON does not show the redacted token: %s", outputs[len(outputs)-2])
	}
}

func TestTokenNotInErrors(t *testing.T) {
	srcs := []string{
		// The token itself malformed.
		`nomad {
  token = ["` + secretToken + `"]
}`,
		`nomad {
  token = {x = "` + secretToken + `"}
}`,
		// Other errors around a valid token.
		`nomad {
  token = "` + secretToken + `"
  address = "ftp://user:` + secretToken + `@nomad:4646"
  tokenn = "` + secretToken + `"
  namespace = "*"
}`,
		`nomad {
  address = "http://user:` + secretToken + `@nomad:port"
}`,
		// Syntax errors next to it.
		`nomad {
  token = "` + secretToken + `
}`,
		`nomad {
  token = "` + secretToken + `" "x"
}`,
		`nomad {
  token = ` + secretToken + `
}`,
	}
	for i, src := range srcs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			_, err := LoadBytes([]byte(src), "t.hcl")
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), secretToken) || strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("the error shows the token:\n%v", err)
			}
		})
	}
	// From the environment.
	c := Default()
	env := map[string]string{"NOMAD_TOKEN": secretToken, "NOMAD_ADDR": "gopher://x:" + secretToken + "@h", "NOMAD_SKIP_VERIFY": "false"}
	if err := c.ApplyEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	_, err := Compile(c)
	if err == nil || strings.Contains(err.Error(), secretToken) {
		t.Errorf("validate error = %v", err)
	}
}
