package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// FleetLock attacks against the real `rollboot coordinator`, run with the
// coordinator token minted from the shipped policy: a stranger on the FleetLock
// port can neither reboot an agent host, nor fill the control variable, nor use
// its certificate to ask for another machine's id.

// testPKI is a CA with a server certificate for 127.0.0.1 and one client
// certificate per id (the id as common name and DNS name, as the FleetLock docs
// ask), written as PEM files.
type testPKI struct {
	dir                           string
	ca                            *x509.Certificate
	caKey                         *ecdsa.PrivateKey
	pool                          *x509.CertPool
	serverCert, serverKey, caFile string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	var err error
	p.caKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rollboot test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.caKey.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(p.ca)
	p.caFile = p.write(t, "ca.pem", "CERTIFICATE", der)
	cert, key := p.issue(t, "server", func(c *x509.Certificate) {
		c.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	})
	p.serverCert, p.serverKey = cert, key
	return p
}

func (p *testPKI) write(t *testing.T, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// issue signs a certificate for name and returns its cert and key files.
func (p *testPKI) issue(t *testing.T, name string, edit func(*x509.Certificate)) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature}
	edit(tmpl)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, name+".pem", "CERTIFICATE", der), p.write(t, name+"-key.pem", "EC PRIVATE KEY", kder)
}

// clientFor is an HTTPS client presenting the certificate of id.
func (p *testPKI) clientFor(t *testing.T, id string) *http.Client {
	t.Helper()
	certFile, keyFile := p.issue(t, id, func(c *x509.Certificate) {
		c.DNSNames = []string{id}
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	})
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.pool, Certificates: []tls.Certificate{pair}}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// fleetLockCall sends one FleetLock call as Zincati does, with the given client.
func fleetLockCall(t *testing.T, hc *http.Client, base, endpoint, id string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"client_params": map[string]string{"id": id, "group": "default"}})
	req, err := http.NewRequest(http.MethodPost, base+"v1/"+endpoint, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("fleet-lock-protocol", "true")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestSecurityFleetLockRefusesStrangers(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	addr := freeAddr(t)
	const allowed, other = "a1b2c3d4e5f60718293a4b5c6d7e8f90", "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
	c := newCluster(t, clusterOpts{clients: 2, coordinators: 1, acl: true, jobs: standardJobs[2:],
		coordOnly: fmt.Sprintf(`fleetlock {
  enabled     = true
  listen      = %q
  tls_cert    = %q
  tls_key     = %q
  client_ca   = %q
  allowed_ids = [%q, %q]
}
`, addr, pki.serverCert, pki.serverKey, pki.caFile, allowed, other)})
	tokens := mintTokens(t, c.client)
	c.opts.agentToken, c.opts.coordToken = tokens["rollboot-agent"], tokens["rollboot-coordinator"]
	c.start()
	hosts := c.clients()
	base := "https://" + addr + "/"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.waitFor("every agent published its record", 30*time.Second, func() bool {
		recs, _, err := c.st.Hosts(ctx, 0, 0)
		return err == nil && len(recs) == len(hosts)
	})
	c.waitFor("the FleetLock port answers", 30*time.Second, func() bool {
		code, _ := fleetLockCall(t, pki.clientFor(t, allowed), base, "steady-state", allowed)
		return code != 0
	})

	// Agents publish no FleetLock id unless asked: a stranger learns none to ask for.
	recs, _, err := c.st.Hosts(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if !strings.HasPrefix(r.Host, "fleetlock-") && r.FleetLockID != "" {
			t.Errorf("%s publishes FleetLock id %q by default", r.Host, r.FleetLockID)
		}
	}

	// No client certificate: the TLS handshake fails.
	plain := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool}}, Timeout: 10 * time.Second}
	defer plain.CloseIdleConnections()
	if code, body := fleetLockCall(t, plain, base, "pre-reboot", allowed); code != 0 {
		t.Errorf("pre-reboot without a client certificate: %d %s", code, body)
	}
	// A certificate for one id, asking for another id that is backed.
	thief := pki.clientFor(t, allowed)
	if code, body := fleetLockCall(t, thief, base, "pre-reboot", other); code != http.StatusForbidden || !strings.Contains(body, "forbidden") {
		t.Errorf("pre-reboot for %s with the certificate of %s: %d %s, want 403 forbidden", other, allowed, code, body)
	}
	// An id nothing backs, with a certificate that names it.
	const unknown = "deadbeefdeadbeefdeadbeefdeadbeef"
	if code, body := fleetLockCall(t, pki.clientFor(t, unknown), base, "pre-reboot", unknown); code != http.StatusForbidden || !strings.Contains(body, "unknown_id") {
		t.Errorf("pre-reboot for an unknown id: %d %s, want 403 unknown_id", code, body)
	}
	checkFleetLockFlood(ctx, t, c, pki.clientFor(t, unknown), base, allowed, hosts)

	// The machine with the right certificate gets its slot.
	c.waitFor("pre-reboot 200 for the allowed id with its own certificate", 60*time.Second, func() bool {
		code, _ := fleetLockCall(t, thief, base, "pre-reboot", allowed)
		return code == http.StatusOK
	})
}

// checkFleetLockFlood sends 300 pre-reboot requests for ids nothing backs: none is
// granted, none is stored in control or as a host record, nothing is drained.
func checkFleetLockFlood(ctx context.Context, t *testing.T, c *cluster, flood *http.Client, base, allowed string, hosts []string) {
	t.Helper()
	// A flood of unknown ids: refused (403 or 429), nothing stored.
	for i := range 300 {
		id := fmt.Sprintf("%032x", i)
		if code, body := fleetLockCall(t, flood, base, "pre-reboot", id); code == http.StatusOK {
			t.Fatalf("flood request %d granted: %s", i, body)
		}
	}
	ctl, err := c.st.Control(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ctl.Requests); n != 0 {
		t.Errorf("control holds %d requests after the flood, want 0", n)
	}
	recs, _, err := c.st.Hosts(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Host != "fleetlock-"+allowed && !slices.Contains(hosts, r.Host) {
			t.Errorf("a host record %s was stored for a refused request", r.Host)
		}
	}
	for _, e := range c.sim.Events(0) {
		if e.Type == nomadsim.EventDrainStart {
			t.Errorf("a drain started during the attacks: %+v", e)
		}
	}

}

// An agent record remaps an allow-listed machine's FleetLock id to its own host
// (any host holding the agent token can write any record): the operator's
// allow-list wins, the machine gets no slot past max_nodeless_slots while the
// only one is held, and the remapping host is neither drained nor rebooted.
func TestSecurityFleetLockRemapRefused(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	addr := freeAddr(t)
	const holder, victim = "a1b2c3d4e5f60718293a4b5c6d7e8f90", "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
	c, ag := trustCluster(t, clusterOpts{clients: 2, coordOnly: fmt.Sprintf(`fleetlock {
  enabled            = true
  listen             = %q
  tls_cert           = %q
  tls_key            = %q
  client_ca          = %q
  allowed_ids        = [%q, %q]
  max_nodeless_slots = 1
}
`, addr, pki.serverCert, pki.serverKey, pki.caFile, holder, victim), policy: `group "all" {
  concurrency = 2
}`})
	base := "https://" + addr + "/"
	hosts := c.clients()
	remapper := hosts[0]
	c.waitFor("the holder's pre-reboot granted", 60*time.Second, func() bool {
		code, _ := fleetLockCall(t, pki.clientFor(t, holder), base, "pre-reboot", holder)
		return code == http.StatusOK
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	forge(ctx, &wg, ag, remapper, func(r *store.HostRecord) { r.FleetLockID = victim })
	victimClient := pki.clientFor(t, victim)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if code, body := fleetLockCall(t, victimClient, base, "pre-reboot", victim); code == http.StatusOK {
			t.Fatalf("%s granted while the only nodeless slot is held: %s", victim, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	// The holder is back (Zincati retries steady-state until the cycle is
	// over): the machine gets the slot as itself.
	c.waitFor("steady-state 200 for the holder", 60*time.Second, func() bool {
		code, _ := fleetLockCall(t, pki.clientFor(t, holder), base, "steady-state", holder)
		return code == http.StatusOK
	})
	c.waitFor(victim+" granted once the slot is free", 60*time.Second, func() bool {
		code, _ := fleetLockCall(t, victimClient, base, "pre-reboot", victim)
		return code == http.StatusOK
	})
	for _, e := range c.sim.Events(0) {
		if e.Type == nomadsim.EventDrainStart && nodeHost(c, e) == remapper {
			t.Errorf("%s was drained: %+v", remapper, e)
		}
	}
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: map[string]int{hosts[0]: 0, hosts[1]: 0}})
}
