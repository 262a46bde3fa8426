package doctor

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/rollboot/rollboot/internal/health"
)

// checkClusters: when host records name Consul or Vault servers, their
// cluster's health can be read, since every reboot of such a host waits for
// that cluster's quorum gate.
func checkClusters(cs []ClusterInput) []Finding {
	var out []Finding
	for _, c := range cs {
		name, env := productName(c.Product)
		hosts := strings.Join(c.Hosts, ", ")
		f := Finding{Check: CheckClusters, Subject: string(c.Product)}
		switch h := c.Health; {
		case c.NoClient:
			f.Severity = Error
			f.What = fmt.Sprintf("hosts %s run %s servers, but no %s client is configured: their reboots wait forever", hosts, name, name)
			f.Fix = "set " + env + " for the coordinator and for rollboot doctor"
		case h.Err != nil:
			f.Severity = Error
			f.What = fmt.Sprintf("cannot read the %s cluster's health: %v: the reboots of %s wait until it can", name, h.Err, hosts)
			f.Fix = "set " + env
			if statusOf(h.Err) == http.StatusForbidden || strings.Contains(h.Err.Error(), "403") || strings.Contains(strings.ToLower(h.Err.Error()), "permission denied") {
				f.Fix = "give the token " + rights(c.Product) + ", and " + env
			}
		case !h.Healthy:
			f.Severity = Warning
			f.What = fmt.Sprintf("the %s cluster %s is not healthy (failure tolerance %d): its servers' hosts wait", name, h.Cluster, h.FailureTolerance)
			f.Fix = "see `" + healthCommand(c.Product) + "`"
		default:
			f.What = fmt.Sprintf("the %s cluster %s is healthy (failure tolerance %d)", name, h.Cluster, h.FailureTolerance)
		}
		out = append(out, f)
		if !c.NoClient {
			out = append(out, handOverFinding(c))
		}
	}
	return out
}

// handOverFinding: the token may hand the cluster's leadership over, as the
// coordinator does before it reboots a host whose server leads; without the
// right, such a host is held or reboots as leader
// (coordinator.leader_transfer_denied).
func handOverFinding(c ClusterInput) Finding {
	name, env := productName(c.Product)
	r := c.HandOver
	f := Finding{Check: CheckClusters, Subject: string(c.Product) + " hand-over", Fix: "give the token " + handOverRight(c.Product) + " (" + env + ")"}
	switch {
	case r.Err != nil:
		f.Severity = Warning
		f.What = fmt.Sprintf("cannot tell whether the %s token may hand leadership over: %v", name, r.Err)
	case !r.Known:
		f.Severity = Info
		f.What = fmt.Sprintf("cannot tell whether the %s token may hand leadership over (%s)", name, r.Detail)
	case !r.Allowed:
		f.Severity = Warning
		f.What = fmt.Sprintf("the %s token may not hand leadership over (%s): a host whose %s server leads is held, or reboots as leader, as coordinator.leader_transfer_denied says",
			name, r.Detail, name)
	default:
		f.What, f.Fix = fmt.Sprintf("the %s token may hand leadership over (%s)", name, r.Detail), ""
	}
	return f
}

func handOverRight(p health.Product) string {
	if p == health.Vault {
		return `update and sudo on sys/step-down (path "sys/step-down" { capabilities = ["update", "sudo"] })`
	}
	return `operator:write (operator = "write")`
}

func productName(p health.Product) (name, env string) {
	if p == health.Vault {
		return "Vault", "VAULT_ADDR and VAULT_TOKEN (and VAULT_CACERT with TLS)"
	}
	return "Consul", "CONSUL_HTTP_ADDR and CONSUL_HTTP_TOKEN (and CONSUL_CACERT with TLS)"
}

func rights(p health.Product) string {
	if p == health.Vault {
		return `read on sys/storage/raft/autopilot/state (path "sys/storage/raft/autopilot/state" { capabilities = ["read"] })`
	}
	return `operator:read (operator = "read")`
}

func healthCommand(p health.Product) string {
	if p == health.Vault {
		return "vault operator raft autopilot state"
	}
	return "consul operator autopilot state"
}
