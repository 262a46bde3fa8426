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
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type testCert struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

func newCert(t *testing.T, cn string, parent *testCert, isCA bool, server bool) *testCert {
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
	}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCert{cert: c, key: key, der: der}
}

func (c *testCert) write(t *testing.T, dir, name string) (certPath, keyPath string) {
	t.Helper()
	certPath, keyPath = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	kb, err := x509.MarshalECPrivateKey(c.key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}

func (c *testCert) tlsCert() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{c.der}, PrivateKey: c.key, Leaf: c.cert}
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	// The server's certificate is self-signed; client certificates come from a CA.
	serverCert := newCert(t, "rollboot-fleetlock", nil, false, true)
	ca := newCert(t, "fleet CA", nil, true, false)
	client := newCert(t, "zincati", ca, false, false)
	stranger := newCert(t, "stranger", nil, false, false) // self-signed, not by the CA
	certPath, keyPath := serverCert.write(t, dir, "server")
	caPath, _ := ca.write(t, dir, "ca")

	cfg, err := TLSConfig(TLSFiles{Cert: certPath, Key: keyPath, ClientCA: caPath})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, srv.Handler()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	roots := x509.NewCertPool()
	roots.AddCert(serverCert.cert)
	url := "https://" + ln.Addr().String() + PathSteadyState
	call := func(certs ...tls.Certificate) (*http.Response, error) {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs},
		}}
		// No fleet-lock-protocol header: a request that gets through is answered
		// missing_header by the handler, without touching any state.
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
		return c.Do(req)
	}

	if resp, err := call(); err == nil {
		resp.Body.Close()
		t.Fatalf("a client without a certificate got through: %s", resp.Status)
	}
	if resp, err := call(stranger.tlsCert()); err == nil {
		resp.Body.Close()
		t.Fatalf("a client with a certificate not signed by the CA got through: %s", resp.Status)
	}
	resp, err := call(client.tlsCert())
	if err != nil {
		t.Fatalf("a client with a certificate signed by the CA was refused: %v", err)
	}
	defer resp.Body.Close()
	var body ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusBadRequest || body.Kind != KindMissingHeader {
		t.Fatalf("got %s %+v (%v), want 400 %s", resp.Status, body, err, KindMissingHeader)
	}
}

func TestTLSConfigErrors(t *testing.T) {
	if cfg, err := TLSConfig(TLSFiles{}); cfg != nil || err != nil {
		t.Fatalf("no TLS: %v, %v", cfg, err)
	}
	if _, err := TLSConfig(TLSFiles{ClientCA: "/x"}); err == nil {
		t.Fatal("client CA without a certificate: no error")
	}
	if _, err := TLSConfig(TLSFiles{Cert: "/nonexistent.pem", Key: "/nonexistent-key.pem"}); err == nil {
		t.Fatal("missing files: no error")
	}
}
