package fleetlock

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultRateClients bounds the clients whose request rate is tracked.
const DefaultRateClients = 4096

// clientKey is who sent r, for the rate limit: its client certificate with
// mutual TLS (the server verified it; the cert id check ran before), else its
// source address. Several clients behind one proxy or NAT share an address.
func clientKey(r *http.Request) string {
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		sum := sha256.Sum256(r.TLS.PeerCertificates[0].Raw)
		return "cert:" + hex.EncodeToString(sum[:])
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "addr:" + host
}

// limiters is a token bucket per client: rate a second, bursts of burst. At
// most max clients are tracked: to make room it forgets first the clients whose
// bucket is full again (forgetting them changes nothing), then the one seen
// longest ago (which then starts again with a full bucket: a flood from many
// clients can only give a client more room, never less).
type limiters struct {
	rate  rate.Limit
	burst int
	max   int

	mu      sync.Mutex
	clients map[string]*clientBucket
}

type clientBucket struct {
	lim  *rate.Limiter
	seen time.Time
}

func newLimiters(perSecond float64, maxClients int) *limiters {
	if maxClients <= 0 {
		maxClients = DefaultRateClients
	}
	return &limiters{rate: rate.Limit(perSecond), burst: max(1, int(2*perSecond)), max: maxClients,
		clients: map[string]*clientBucket{}}
}

// allow takes a token from key's bucket at now; false when it has none.
func (l *limiters) allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.clients[key]
	if !ok {
		if len(l.clients) >= l.max {
			l.evict(now)
		}
		b = &clientBucket{lim: rate.NewLimiter(l.rate, l.burst)}
		l.clients[key] = b
	}
	b.seen = now
	return b.lim.AllowN(now, 1)
}

// evict makes room for one client.
func (l *limiters) evict(now time.Time) {
	oldest, at := "", time.Time{}
	for k, b := range l.clients {
		if b.lim.TokensAt(now) >= float64(l.burst) {
			delete(l.clients, k)
			continue
		}
		if oldest == "" || b.seen.Before(at) {
			oldest, at = k, b.seen
		}
	}
	if len(l.clients) >= l.max {
		delete(l.clients, oldest)
	}
}

// tracked is the number of clients tracked.
func (l *limiters) tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}
