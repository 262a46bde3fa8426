package statuspage

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/rollboot/rollboot/internal/status"
	"github.com/rollboot/rollboot/internal/watch"
)

//go:embed assets
var assets embed.FS

// Paths of the page.
const (
	PathPage   = "/"
	PathJSON   = "/api/status"
	PathEvents = "/events"
)

// Server serves the page, its JSON and its live updates. Run must run for the
// live updates to flow.
type Server struct {
	src Source
	log *slog.Logger
	// hosts are the names the page answers to beside IP addresses and
	// localhost (hosts.go); maxStreams bounds the live pages served at once.
	hosts      map[string]bool
	maxStreams int

	mu       sync.Mutex
	subs     map[chan []byte]struct{}
	last     []byte // the last event sent
	lastBody []byte // its page without the time, to tell a change
	lastPage Page   // the last page read, shown again with a read's error
	kick     chan struct{}

	// The JSON route's last read (readShared).
	readMu   sync.Mutex
	readPage Page
	readAt   time.Time
}

// New returns the page's server for src; log gets read errors (nil: none).
func New(src Source, log *slog.Logger) *Server {
	if src.Resync <= 0 {
		src.Resync = 10 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{src: src, log: log, hosts: map[string]bool{}, maxStreams: MaxStreams,
		subs: map[chan []byte]struct{}{}, kick: make(chan struct{}, 1)}
}

// MaxStreams is the most live pages (event streams) a process serves at once:
// each holds a connection and a goroutine for as long as it is open. One more
// gets 503 with Retry-After; /api/status still answers it.
const MaxStreams = 64

// Register adds the page's routes to mux. Every route answers only to the
// names the page knows (hosts.go), and GET (and HEAD) only: the page has no
// write action.
func (s *Server) Register(mux *http.ServeMux) {
	static, _ := fs.Sub(assets, "assets")
	files := http.FileServerFS(static)
	mux.Handle(PathPage, s.checkHost(getOnly(func(w http.ResponseWriter, r *http.Request) {
		// Nothing but its own files, and not inside another site's frame.
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	})))
	mux.Handle(PathJSON, s.checkHost(getOnly(s.serveJSON)))
	mux.Handle(PathEvents, s.checkHost(getOnly(s.serveEvents)))
}

func getOnly(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the status page is read-only", http.StatusMethodNotAllowed)
			return
		}
		h(w, r)
	})
}

func (s *Server) serveJSON(w http.ResponseWriter, r *http.Request) {
	p, err := s.readShared(r.Context())
	if err != nil {
		http.Error(w, "read the rollout's state: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(p)
}

// readShared reads the page for the JSON route. Requests that come while a
// read runs wait for it, and those within minGap of the last read get its page:
// however often the route is asked (a script polling it, many browsers), the
// page costs Nomad at most about two reads a second, each of every host record
// and plan. A failed read is not kept.
func (s *Server) readShared(ctx context.Context) (Page, error) {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	if !s.readAt.IsZero() && time.Since(s.readAt) < minGap {
		return s.readPage, nil
	}
	p, err := s.src.Read(ctx, time.Now())
	if err != nil {
		return Page{}, err
	}
	s.readPage, s.readAt = p, time.Now()
	return p, nil
}

// serveEvents streams the page as Server-Sent Events: the current page at once,
// then each change, and a "ping" event every 15s so that a dead connection shows
// on both sides. Beyond maxStreams streams it answers 503.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	ch := s.subscribe()
	if ch == nil {
		w.Header().Set("Retry-After", strconv.Itoa(retryStream))
		http.Error(w, fmt.Sprintf("the status page serves at most %d live pages at once: try again later, or read %s",
			s.maxStreams, PathJSON), http.StatusServiceUnavailable)
		return
	}
	defer s.unsubscribe(ch)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	write := func(b []byte) bool {
		// The listener's write timeout would end the stream: extend it per write.
		_ = rc.SetWriteDeadline(time.Now().Add(time.Minute))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write([]byte("retry: 2000\n\n")) {
		return
	}
	beat := time.NewTicker(15 * time.Second)
	defer beat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-beat.C:
			if !write([]byte("event: ping\ndata: \n\n")) {
				return
			}
		case msg := <-ch:
			if !write(msg) {
				return
			}
		}
	}
}

// retryStream is the Retry-After, in seconds, of a stream refused for want of
// room: the page's own reconnection backs off up to 30 s.
const retryStream = 30

// subscribe returns a channel that receives the newest event (older ones not
// yet taken are dropped), starting with the last one known; nil when
// maxStreams streams are open.
func (s *Server) subscribe() chan []byte {
	ch := make(chan []byte, 1)
	s.mu.Lock()
	if len(s.subs) >= s.maxStreams {
		s.mu.Unlock()
		return nil
	}
	s.subs[ch] = struct{}{}
	if s.last != nil {
		ch <- s.last
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return ch
}

func (s *Server) unsubscribe(ch chan []byte) {
	s.mu.Lock()
	delete(s.subs, ch)
	s.mu.Unlock()
}

func (s *Server) subscribers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// publish sends an event to every subscriber, unless it is the last one sent.
func (s *Server) publish(p Page) {
	now := p.Now
	p.Now = 0 // the time alone is no change
	b, err := json.Marshal(p)
	if err != nil {
		s.log.Error("status page: encode", "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if bytes.Equal(b, s.lastBody) {
		return
	}
	s.lastBody = b
	p.Now = now
	b, _ = json.Marshal(p)
	msg := make([]byte, 0, len(b)+8)
	msg = append(append(append(msg, "data: "...), b...), "\n\n"...)
	s.last = msg
	for ch := range s.subs {
		select {
		case <-ch:
		default:
		}
		ch <- msg
	}
}

// minGap is the least time between two reads: a burst of changes is one update.
const minGap = 500 * time.Millisecond

// Run keeps the live updates flowing until ctx ends: while anyone listens, it
// reads the page on every change of rollboot's state (a blocking query), or
// every Resync, and at most every half second.
func (s *Server) Run(ctx context.Context) {
	var idx uint64
	for ctx.Err() == nil {
		if s.subscribers() == 0 {
			select {
			case <-ctx.Done():
				return
			case <-s.kick:
			}
		}
		if s.src.Watch != nil && idx == 0 {
			idx, _ = s.src.Watch(ctx, 0, 0)
		}
		p, err := s.src.Read(ctx, time.Now())
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("status page: read the rollout's state", "err", err)
			s.mu.Lock()
			p = s.lastPage
			s.mu.Unlock()
			if p.Groups == nil { // nothing read yet
				p = Build(Input{View: status.View{Hosts: []status.Host{}}})
			}
			p.Now, p.Error = time.Now().UnixMilli(), err.Error()
		}
		s.mu.Lock()
		if err == nil {
			s.lastPage = p
		}
		s.mu.Unlock()
		s.publish(p)
		watch.Sleep(ctx, minGap)
		idx = s.waitChange(ctx, idx, err != nil)
	}
}

// waitChange waits for a change of the state past idx, a new listener, or the
// resync time (after a failed read: the resync time, without a watch).
func (s *Server) waitChange(ctx context.Context, idx uint64, failed bool) uint64 {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan uint64, 1)
	go func() {
		if s.src.Watch == nil || failed || idx == 0 {
			watch.Sleep(wctx, s.src.Resync)
			done <- 0
			return
		}
		n, err := s.src.Watch(wctx, idx, s.src.Resync)
		if err != nil {
			if wctx.Err() == nil {
				s.log.Warn("status page: watch the rollout's state", "err", err)
			}
			watch.Sleep(wctx, time.Second) // do not spin on a failing watch
			n = 0
		}
		done <- n
	}()
	select {
	case n := <-done:
		return n
	case <-s.kick:
		cancel()
		return <-done
	}
}
