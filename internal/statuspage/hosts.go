package statuspage

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// The page answers only to names that no web site controls. DNS rebinding is
// a web page on evil.example whose name its owner then points at the address
// of a host inside the network (or at 127.0.0.1): the browser takes the page
// and the status page for the same site and lets the script read it, but the
// requests still name evil.example in their Host header. So a Host header
// must be an IP address (a browser that asks by address names no site of
// anyone's), localhost (RFC 6761: never asked of DNS), or a name the process
// was given (AllowHosts: its own host names, telemetry.allowed_hosts). Other
// names are refused with 421 Misdirected Request.

// AllowHosts adds names the page answers to, beside IP addresses and
// localhost: a Host header with one of them, in any case and with any port,
// is served. Call it before the page is served.
func (s *Server) AllowHosts(names ...string) {
	for _, n := range names {
		if n = hostName(n); n != "" {
			s.hosts[n] = true
		}
	}
}

// hostAllowed reports whether the page answers to a request's Host header.
// No Host header (HTTP/1.0) is no browser's request: it is served.
func (s *Server) hostAllowed(host string) bool {
	name := hostName(host)
	if name == "" || name == "localhost" || strings.HasSuffix(name, ".localhost") || s.hosts[name] {
		return true
	}
	_, err := netip.ParseAddr(name)
	return err == nil
}

// hostName returns the name of a Host header: without its port or the
// brackets of an IPv6 address, in lower case, without a final dot.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// checkHost refuses the requests whose Host header the page does not answer to.
func (s *Server) checkHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			http.Error(w, "rollboot's status page does not answer to the name "+quote(r.Host)+
				" (a defence against DNS rebinding): open it by IP address or as localhost, "+
				"or add the name to telemetry.allowed_hosts", http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// quote quotes a Host header for an error message, shortened.
func quote(host string) string {
	if len(host) > 100 {
		host = host[:100]
	}
	return strconv.Quote(host)
}
