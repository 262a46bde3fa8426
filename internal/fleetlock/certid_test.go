package fleetlock

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// clientCert makes a client certificate signed by ca with the given common name
// and DNS and URI names.
func clientCert(t *testing.T, ca *testCert, cn string, dns []string, uris ...string) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:     dns,
	}
	for _, u := range uris {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCert{cert: c, key: key, der: der}
}

func TestCertNamesID(t *testing.T) {
	ca := newCert(t, "fleet CA", nil, true, false)
	const id = "0123456789abcdef0123456789abcdef"
	byCN := clientCert(t, ca, id, nil)
	bySAN := clientCert(t, ca, "zincati", []string{id})
	byURI := clientCert(t, ca, "zincati", nil, "urn:fleetlock:x", "spiffe://"+id)
	other := clientCert(t, ca, "ffffffffffffffffffffffffffffffff", []string{"ffffffffffffffffffffffffffffffff"})
	state := func(c *testCert) *tls.ConnectionState {
		return &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c.cert}}
	}
	for _, tt := range []struct {
		name  string
		state *tls.ConnectionState
		mode  string
		ok    bool
	}{
		{"off", nil, "", true},
		{"none", nil, CertIDNone, true},
		{"no certificate", nil, CertIDSANOrCN, false},
		{"empty chain", &tls.ConnectionState{}, CertIDSAN, false},
		{"cn in san_or_cn", state(byCN), CertIDSANOrCN, true},
		{"san in san_or_cn", state(bySAN), CertIDSANOrCN, true},
		{"uri host in san", state(byURI), CertIDSAN, true},
		{"cn when san is required", state(byCN), CertIDSAN, false},
		{"san when cn is required", state(bySAN), CertIDCN, false},
		{"cn in cn", state(byCN), CertIDCN, true},
		{"another id", state(other), CertIDSANOrCN, false},
		{"another id, cn", state(other), CertIDCN, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			why := CertNamesID(tt.state, id, tt.mode)
			if (why == "") != tt.ok {
				t.Fatalf("CertNamesID = %q, want ok=%v", why, tt.ok)
			}
		})
	}
}

// With mutual TLS, a client with a valid certificate for one id cannot ask for
// another id, even one the server knows.
func TestMutualTLSCertificateForAnotherID(t *testing.T) {
	dir := t.TempDir()
	serverCert := newCert(t, "rollboot-fleetlock", nil, false, true)
	ca := newCert(t, "fleet CA", nil, true, false)
	a, b := "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	certA := clientCert(t, ca, "host-a", []string{a})
	certPath, keyPath := serverCert.write(t, dir, "server")
	caPath, _ := ca.write(t, dir, "ca")

	sim, err := nomadsim.New(nomadsim.Config{Clients: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	client, err := api.NewClient(&api.Config{Address: sim.Address()})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(client.Variables(), "rollboot", "default")

	cfg, err := TLSConfig(TLSFiles{Cert: certPath, Key: keyPath, ClientCA: caPath})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Options{Store: st, Nodes: client.Nodes(), AllowedIDs: []string{a, b}, ClientCertID: CertIDSANOrCN})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, srv.Handler()) }()
	t.Cleanup(func() { cancel(); <-done })

	roots := x509.NewCertPool()
	roots.AddCert(serverCert.cert)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{certA.tlsCert()}},
	}}
	call := func(id string) (int, ErrorBody) {
		t.Helper()
		body := fmt.Sprintf(`{"client_params":{"id":%q,"group":"default"}}`, id)
		req, _ := http.NewRequest(http.MethodPost, "https://"+ln.Addr().String()+PathSteadyState, strings.NewReader(body))
		req.Header.Set("fleet-lock-protocol", "true")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var eb ErrorBody
		if resp.StatusCode != http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
				t.Fatalf("%d without a JSON body: %v", resp.StatusCode, err)
			}
		}
		return resp.StatusCode, eb
	}
	if code, eb := call(b); code != http.StatusForbidden || eb.Kind != KindForbidden {
		t.Fatalf("certificate of %s asking for %s: %d %+v", a, b, code, eb)
	}
	if _, err := st.Host(ctx, HostPrefix+b); err == nil {
		t.Fatal("the refused request wrote a record")
	}
	if code, eb := call(a); code != http.StatusOK {
		t.Fatalf("certificate of %s asking for itself: %d %+v", a, code, eb)
	}
}
