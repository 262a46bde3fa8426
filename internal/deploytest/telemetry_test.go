package deploytest

import (
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/rollboot/rollboot/internal/config"
)

// checkCoordinatorTelemetry: every coordinator instance serves /metrics and
// the status page on the group's port, registered as a Nomad service
// (provider nomad, so Prometheus's nomad_sd_configs finds it) with an HTTP
// check.
func checkCoordinatorTelemetry(t *testing.T, group *hclsyntax.Body, cfg *config.Compiled) {
	t.Helper()
	var portName string
	for _, b := range block(t, group, "network").Blocks {
		if b.Type == "port" && len(b.Labels) == 1 {
			portName = b.Labels[0]
		}
	}
	svc := block(t, group, "service")
	if got := literal(t, svc, "provider"); got != "nomad" {
		t.Errorf("service provider %q, want nomad (Prometheus's nomad_sd_configs)", got)
	}
	if got := literal(t, svc, "port"); got != portName || portName == "" {
		t.Errorf("service port %q, want the group's port %q", got, portName)
	}
	if got := literal(t, svc, "name"); got != "rollboot-coordinator" {
		t.Errorf("service name %q: deploy/prometheus/prometheus.yml selects rollboot-coordinator", got)
	}
	if got := literal(t, block(t, svc, "check"), "type"); got != "http" {
		t.Errorf("service check type %q, want http", got)
	}
	if want := taskEnv["NOMAD_ADDR_"+portName]; cfg.Telemetry.Listen != want {
		t.Errorf("telemetry.listen %q, want the %q port's address %q", cfg.Telemetry.Listen, portName, want)
	}
}
