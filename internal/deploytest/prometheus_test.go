package deploytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	promconfig "github.com/prometheus/common/config"
	"go.yaml.in/yaml/v2"
)

// promtool returns the path of promtool (Debian package prometheus); it skips
// the test when it is missing, unless ROLLBOOT_REQUIRE_PROMETHEUS=1 (CI).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("ROLLBOOT_REQUIRE_PROMETHEUS") == "1" {
			t.Fatal("promtool not installed (Debian package prometheus) and ROLLBOOT_REQUIRE_PROMETHEUS=1")
		}
		t.Skip("promtool not installed (Debian package prometheus)")
	}
	return p
}

// nomadSD is Prometheus's nomad_sd_configs entry, field for field as
// prometheus/prometheus discovery/nomad/nomad.go SDConfig declares it (with
// the HTTP client settings of prometheus/common inline). Debian's Prometheus
// is built without Nomad service discovery (its 08-Disable_nomad.patch), so
// its promtool rejects the block: the test reads the block strictly into
// this type instead, and has promtool check the rest.
type nomadSD struct {
	AllowStale       bool                        `yaml:"allow_stale"`
	HTTPClientConfig promconfig.HTTPClientConfig `yaml:",inline"`
	Namespace        string                      `yaml:"namespace"`
	RefreshInterval  string                      `yaml:"refresh_interval"`
	Region           string                      `yaml:"region"`
	Server           string                      `yaml:"server"`
	TagSeparator     string                      `yaml:"tag_separator,omitempty"`
}

type scrapeConfig struct {
	JobName  string          `yaml:"job_name"`
	NomadSD  []yaml.MapSlice `yaml:"nomad_sd_configs"`
	Relabels []struct {
		SourceLabels []string `yaml:"source_labels"`
		Regex        string   `yaml:"regex"`
		Action       string   `yaml:"action"`
	} `yaml:"relabel_configs"`
}

// The example scrape configuration finds every coordinator instance through
// Nomad's service catalogue (nomad_sd_configs), in the namespace and under the
// service name the coordinator job registers, and passes promtool.
func TestPrometheusScrapeConfig(t *testing.T) {
	p := promtool(t)
	path := deployPath("prometheus", "prometheus.yml")
	src := read(t, path)
	var doc struct {
		Scrape []scrapeConfig `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	jobBody, _ := parseJob(t, deployPath("nomad", "rollboot-coordinator.nomad.hcl"))
	job := block(t, jobBody, "job")
	wantNS, wantSvc := literal(t, job, "namespace"), literal(t, block(t, block(t, job, "group"), "service"), "name")
	found := false
	for _, sc := range doc.Scrape {
		for _, raw := range sc.NomadSD {
			b, _ := yaml.Marshal(raw)
			var sd nomadSD
			if err := yaml.UnmarshalStrict(b, &sd); err != nil {
				t.Errorf("%s: job %s: nomad_sd_configs: %v", path, sc.JobName, err)
				continue
			}
			if err := sd.HTTPClientConfig.Validate(); err != nil {
				t.Errorf("%s: job %s: nomad_sd_configs: %v", path, sc.JobName, err)
			}
			keep := ""
			for _, r := range sc.Relabels {
				if r.Action == "keep" && len(r.SourceLabels) == 1 && r.SourceLabels[0] == "__meta_nomad_service" {
					keep = r.Regex
				}
			}
			found = found || sd.Namespace == wantNS && keep == wantSvc
		}
	}
	if !found {
		t.Errorf("%s: no nomad_sd_configs job keeps service %q of namespace %q (the coordinator job's)", path, wantSvc, wantNS)
	}

	out, err := exec.Command(p, "check", "config", path).CombinedOutput()
	if err == nil {
		return
	}
	if !strings.Contains(string(out), "field nomad_sd_configs not found") {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	// This promtool has no Nomad discovery: check the rest, with a static
	// target in place of each discovery.
	t.Logf("promtool has no Nomad service discovery (Debian's build): the rest of the file is checked")
	dir := t.TempDir()
	static := strings.ReplaceAll(string(src), "nomad_sd_configs:", "static_configs:\n      - targets: [\"127.0.0.1:9464\"]\n    unused_nomad_sd:")
	static = stripUnused(static)
	for name, content := range map[string]string{"prometheus.yml": static, "rollboot.rules.yml": string(read(t, deployPath("prometheus", "rollboot.rules.yml")))} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(p, "check", "config", filepath.Join(dir, "prometheus.yml")).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config (Nomad discovery replaced by a static target): %v\n%s\n%s", err, out, static)
	}
}

// stripUnused drops the "unused_nomad_sd:" blocks stripped of their meaning:
// the lines under one, indented deeper than it.
func stripUnused(s string) string {
	var out []string
	skip := -1
	for _, line := range strings.Split(s, "\n") {
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if skip >= 0 && (indent > skip || strings.TrimSpace(line) == "") {
			continue
		}
		skip = -1
		if strings.TrimSpace(line) == "unused_nomad_sd:" {
			skip = indent
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}
