package nomadsim

import (
	"strconv"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
)

// vlClient is a real vault/api client for the host:port addr, without retries.
func vlClient(t *testing.T, addr, token string) *vaultapi.Client {
	t.Helper()
	cfg := vaultapi.DefaultConfig()
	cfg.Address = "http://" + strings.TrimPrefix(addr, "http://")
	cfg.MaxRetries = 0
	t.Cleanup(cfg.HttpClient.CloseIdleConnections)
	c, err := vaultapi.NewClient(cfg)
	if err != nil {
		t.Fatalf("vault NewClient: %v", err)
	}
	c.SetToken(token)
	return c
}

func vlAddr(t *testing.T, s *Sim, host string) string {
	t.Helper()
	h, ok := s.Host(host)
	if !ok || h.VaultAddr == "" {
		t.Fatalf("host %s runs no vault", host)
	}
	return "http://" + h.VaultAddr
}

func vlCode(t *testing.T, base, query string) int {
	t.Helper()
	code, _, body, err := auxDo(t, "GET", base, "/v1/sys/health"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code != 400 && !strings.Contains(body, `"initialized"`) {
		t.Fatalf("health%s: %d %s", query, code, body)
	}
	return code
}

func TestVaultHealthCodes(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, VaultServers: true})
	active, standbys := auxFollowers(s, s.vault.Raft())
	a, sb, other := vlAddr(t, s, active), vlAddr(t, s, standbys[0]), vlAddr(t, s, standbys[1])

	for _, tc := range []struct {
		base, query string
		want        int
	}{
		{a, "", 200},
		{a, "?activecode=202", 202},
		{a, "?standbycode=299", 200},
		{sb, "", 429},
		{sb, "?standbyok=true", 200},
		{sb, "?standbyok=true&activecode=201", 201},
		{sb, "?standbycode=299", 299},
		{sb, "?perfstandbyok=true", 429},
		{sb, "?standbyok=maybe", 400},
		{sb, "?sealedcode=abc", 400},
	} {
		if got := vlCode(t, tc.base, tc.query); got != tc.want {
			t.Fatalf("%s health%s: %d, want %d", tc.base, tc.query, got, tc.want)
		}
	}
	// HEAD: the code, no body.
	if code, _, body, err := auxDo(t, "HEAD", sb, "/v1/sys/health", nil); err != nil || code != 429 || body != "" {
		t.Fatalf("HEAD: %d %q %v", code, body, err)
	}

	// Sys().Health() sets every non-active code to 299 and decodes the body.
	hr, err := vlClient(t, a, "").Sys().Health()
	if err != nil || hr.Standby || hr.Sealed || !hr.Initialized || hr.ClusterID == "" || hr.Version == "" {
		t.Fatalf("active health %+v %v", hr, err)
	}
	hr, err = vlClient(t, sb, "").Sys().Health()
	if err != nil || !hr.Standby || hr.Sealed || hr.HAConnectionHealthy == nil || !*hr.HAConnectionHealthy {
		t.Fatalf("standby health %+v %v", hr, err)
	}

	// A stalled standby cannot heartbeat the active node: 474 comes before standby.
	if err := s.SetVaultServerHealthy(standbys[1], false); err != nil {
		t.Fatal(err)
	}
	if got := vlCode(t, other, "?standbyok=true"); got != 474 {
		t.Fatalf("ha-unhealthy standby: %d", got)
	}
	if got := vlCode(t, other, "?haunhealthycode=299"); got != 299 {
		t.Fatalf("haunhealthycode: %d", got)
	}
	hr, err = vlClient(t, other, "").Sys().Health()
	if err != nil || hr.HAConnectionHealthy == nil || *hr.HAConnectionHealthy {
		t.Fatalf("stalled standby health %+v %v", hr, err)
	}

	// Sealed: 503, before the standby codes and standbyok.
	if err := s.SealVault(standbys[0]); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]int{"": 503, "?standbyok=true": 503, "?sealedcode=200": 200, "?standbycode=200": 503} {
		if got := vlCode(t, sb, q); got != want {
			t.Fatalf("sealed health%s: %d, want %d", q, got, want)
		}
	}
	hr, err = vlClient(t, sb, "").Sys().Health()
	if err != nil || !hr.Sealed || !hr.Initialized || hr.ClusterID != "" {
		t.Fatalf("sealed health %+v %v", hr, err)
	}

	// Not initialized (not reachable through the API: every node starts initialized):
	// 501, before sealed.
	s.mu.Lock()
	err = s.vault.Uninitialize(standbys[0])
	s.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]int{"": 501, "?sealedcode=299": 501, "?uninitcode=299": 299} {
		if got := vlCode(t, sb, q); got != want {
			t.Fatalf("uninit health%s: %d, want %d", q, got, want)
		}
	}
	hr, err = vlClient(t, sb, "").Sys().Health()
	if err != nil || hr.Initialized || !hr.Sealed {
		t.Fatalf("uninit health %+v %v", hr, err)
	}
}

func TestVaultRaftAutopilotState(t *testing.T) {
	for _, tc := range []struct {
		servers int
		want    []int // tolerance with 0, 1, 2 standbys down
	}{
		{3, []int{1, 0}},
		{5, []int{2, 1, 0}},
	} {
		t.Run(strconv.Itoa(tc.servers), func(t *testing.T) {
			s := vtSim(t, Config{Servers: tc.servers, VaultServers: true, BootTime: time.Hour})
			c := vlClient(t, s.VaultAddress(), "root")
			active, standbys := auxFollowers(s, s.vault.Raft())
			for down, want := range tc.want {
				if down > 0 {
					if err := s.Reboot(standbys[down-1]); err != nil {
						t.Fatal(err)
					}
				}
				st, err := c.Sys().RaftAutopilotState()
				if err != nil || st == nil {
					t.Fatalf("down=%d: %+v %v", down, st, err)
				}
				if st.FailureTolerance != want || st.Healthy != (down == 0) || st.Leader != active ||
					len(st.Servers) != tc.servers || len(st.Voters) != tc.servers {
					t.Fatalf("down=%d: %s", down, st)
				}
				ld := st.Servers[active]
				if ld == nil || ld.Status != "leader" || !ld.Healthy || ld.LastContact == "" {
					t.Fatalf("leader %+v", ld)
				}
				if _, err := time.Parse(time.RFC3339, ld.StableSince); err != nil {
					t.Fatalf("stable_since %q: %v", ld.StableSince, err)
				}
				unhealthy := 0
				for _, srv := range st.Servers {
					if !srv.Healthy {
						unhealthy++
						if d, err := time.ParseDuration(srv.LastContact); err != nil || d <= 0 {
							t.Fatalf("last_contact %q", srv.LastContact)
						}
					}
				}
				if unhealthy != down {
					t.Fatalf("down=%d: %d unhealthy", down, unhealthy)
				}
			}
			// Unauthenticated: 403; the standby forwards to the active node.
			if code, _, body, _ := auxDo(t, "GET", s.VaultAddress(), "/v1/sys/storage/raft/autopilot/state", nil); code != 403 {
				t.Fatalf("without token: %d %s", code, body)
			}
			sb := vlAddr(t, s, standbys[len(standbys)-1])
			st, err := vlClient(t, sb, "root").Sys().RaftAutopilotState()
			if err != nil || st.Leader != active {
				t.Fatalf("via standby: %v %v", st, err)
			}
		})
	}
}

func TestVaultStepDownAndElection(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, VaultServers: true, VaultStepDownTime: time.Hour})
	active, standbys := auxFollowers(s, s.vault.Raft())
	// Sent to a standby, step-down is forwarded to the active node.
	if err := vlClient(t, vlAddr(t, s, standbys[0]), "root").Sys().StepDown(); err != nil {
		t.Fatal(err)
	}
	auxWait(t, s, "new active node", func(v *View) bool { return v.s.vault.Raft().Leader() != nil })
	second := s.VaultActive()
	if second == active {
		t.Fatal("the stepped-down node took the lock again")
	}
	lr, err := vlClient(t, vlAddr(t, s, active), "").Sys().Leader()
	if err != nil || lr.IsSelf || !lr.HAEnabled || !strings.HasPrefix(lr.LeaderAddress, "https://") {
		t.Fatalf("leader from old active %+v %v", lr, err)
	}
	if code := vlCode(t, vlAddr(t, s, second), ""); code != 200 {
		t.Fatalf("new active health %d", code)
	}
	if code, _, _, _ := auxDo(t, "PUT", vlAddr(t, s, second), "/v1/sys/step-down", nil); code != 403 {
		t.Fatalf("step-down without token: %d", code)
	}

	// The active node's host reboots: the remaining unheld node takes over.
	if err := s.Reboot(second); err != nil {
		t.Fatal(err)
	}
	auxWait(t, s, "active after reboot", func(v *View) bool {
		l := v.s.vault.Raft().Leader()
		return l != nil && l.Host != second
	})
	if got := s.VaultActive(); got == active {
		t.Fatalf("held node %s became active", got)
	}
	var reasons []string
	for _, e := range s.Events(0) {
		if e.Type == EventVaultActive {
			reasons = append(reasons, e.Details["reason"])
		}
	}
	if strings.Join(reasons, ",") != "election,step-down,election,leader down,election" {
		t.Fatalf("vault.active reasons %v", reasons)
	}
}

func TestVaultSealedAfterReboot(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, VaultServers: true})
	_, standbys := auxFollowers(s, s.vault.Raft())
	name := standbys[0]
	addr := vlAddr(t, s, name)
	if err := s.Reboot(name); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := auxDo(t, "GET", addr, "/v1/sys/health", nil); err == nil {
		t.Fatal("vault answered while its host is down")
	}
	auxWait(t, s, "host back", func(v *View) bool { h, _ := v.Host(name); return h.Up })
	ss, err := vlClient(t, addr, "").Sys().SealStatus()
	if err != nil || !ss.Sealed || !ss.Initialized || ss.Type != "shamir" || ss.StorageType != "raft" {
		t.Fatalf("seal status %+v %v", ss, err)
	}
	if code := vlCode(t, addr, ""); code != 503 {
		t.Fatalf("sealed health %d", code)
	}
	if code, _, body, _ := auxDo(t, "GET", addr, "/v1/sys/leader", nil); code != 503 || !strings.Contains(body, "Vault is sealed") {
		t.Fatalf("sys/leader sealed: %d %s", code, body)
	}
	st, err := vlClient(t, s.VaultAddress(), "root").Sys().RaftAutopilotState()
	if err != nil || st.Healthy || st.FailureTolerance != 0 || st.Servers[name].Healthy || st.Servers[name].NodeStatus != "alive" {
		t.Fatalf("autopilot with a sealed node: %v %v", st, err)
	}

	code, _, body, err := auxDo(t, "POST", s.Address(), "/sim/v1/vault/servers/"+name+"/unseal", nil)
	if err != nil || code != 200 {
		t.Fatalf("unseal: %d %s %v", code, body, err)
	}
	auxWait(t, s, "unsealed node healthy", func(v *View) bool {
		return !v.s.vault.Sealed(name) && v.s.vault.Raft().ByHost(name).Healthy()
	})
	st, err = vlClient(t, s.VaultAddress(), "root").Sys().RaftAutopilotState()
	if err != nil || !st.Healthy || st.FailureTolerance != 1 {
		t.Fatalf("after unseal: %v %v", st, err)
	}
	if code := vlCode(t, addr, ""); code != 429 {
		t.Fatalf("unsealed standby health %d", code)
	}
	var types []string
	for _, e := range s.Events(0) {
		if e.Host == name && (e.Type == EventVaultSealed || e.Type == EventVaultUnsealed) {
			types = append(types, e.Type)
		}
	}
	if strings.Join(types, ",") != "vault.sealed,vault.unsealed" {
		t.Fatalf("events %v", types)
	}
	if code, _, _, _ := auxDo(t, "POST", s.Address(), "/sim/v1/vault/servers/client-9/seal", nil); code != 404 {
		t.Fatalf("unknown host: %d", code)
	}
}

func TestVaultAutoUnseal(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, VaultServers: true, VaultAutoUnseal: true})
	active, _ := auxFollowers(s, s.vault.Raft())
	if err := s.Reboot(active); err != nil {
		t.Fatal(err)
	}
	auxWait(t, s, "new active", func(v *View) bool {
		l := v.s.vault.Raft().Leader()
		return l != nil && l.Host != active
	})
	auxWait(t, s, "host back", func(v *View) bool { h, _ := v.Host(active); return h.Up })
	if s.VaultSealed(active) {
		t.Fatal("auto-unseal node sealed after boot")
	}
	hr, err := vlClient(t, vlAddr(t, s, active), "").Sys().Health()
	if err != nil || hr.Sealed || !hr.Standby {
		t.Fatalf("%+v %v", hr, err)
	}
}

// sys/capabilities-self: the emulated Vault has no policies, so a token has
// root on every path; without a token it is refused.
func TestVaultCapabilitiesSelf(t *testing.T) {
	s := vtSim(t, Config{Servers: 3, VaultServers: true})
	caps, err := vlClient(t, vlAddr(t, s, s.VaultActive()), "root").Sys().CapabilitiesSelf("sys/step-down")
	if err != nil || len(caps) != 1 || caps[0] != "root" {
		t.Fatalf("capabilities on sys/step-down: %v, %v; want [root]", caps, err)
	}
	if _, err := vlClient(t, vlAddr(t, s, s.VaultActive()), "").Sys().CapabilitiesSelf("sys/step-down"); err == nil ||
		!strings.Contains(err.Error(), "permission denied") {
		t.Errorf("without a token: %v, want permission denied", err)
	}
}
