package fleetlock

import (
	"crypto/tls"
	"strings"
)

// CertNamesID says why the client certificate of a request does not name the id
// it asks for ("" when it does, or when mode is CertIDNone or ""). With mutual TLS
// a client may only speak for itself: the id must be one of the certificate's DNS
// or URI names (mode san), its subject common name (cn), or either (san_or_cn).
// A request without a verified client certificate is refused in every other mode.
func CertNamesID(state *tls.ConnectionState, id, mode string) string {
	if mode == "" || mode == CertIDNone {
		return ""
	}
	if state == nil || len(state.PeerCertificates) == 0 {
		return "a client certificate naming the id is required"
	}
	c := state.PeerCertificates[0]
	if mode == CertIDSAN || mode == CertIDSANOrCN {
		for _, n := range c.DNSNames {
			if strings.EqualFold(n, id) {
				return ""
			}
		}
		for _, u := range c.URIs {
			if u.String() == id || u.Opaque == id || strings.EqualFold(u.Host, id) {
				return ""
			}
		}
	}
	if (mode == CertIDCN || mode == CertIDSANOrCN) && c.Subject.CommonName == id {
		return ""
	}
	where := map[string]string{CertIDSAN: "subject alternative names", CertIDCN: "common name", CertIDSANOrCN: "subject alternative names or common name"}[mode]
	// The answer does not repeat the id: what a client learns is about its
	// certificate only.
	return "the client certificate does not name the requested FleetLock id in its " + where
}
