package silence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/rollboot/rollboot/internal/httpcall"
)

// errGone is a silence Alertmanager no longer has, or has expired.
var errGone = errors.New("the silence is gone or expired")

// HTTP writes silences through Alertmanager's v2 API (alertmanager
// api/v2/openapi.yaml: POST /silences, GET and DELETE /silence/{silenceID}).
type HTTP struct {
	// URL is Alertmanager's base URL; user information in it is sent as basic
	// authentication and never shown in errors.
	URL     string
	Timeout time.Duration
	hc      *http.Client
}

// gettable is the part of Alertmanager's gettableSilence that is read back:
// a silence is updated with its own matchers and start, or Alertmanager ends
// it and creates another (silence/silence.go canUpdate).
type gettable struct {
	postable
	Status struct {
		State string `json:"state"` // "active", "pending" or "expired"
	} `json:"status"`
}

// postable is Alertmanager's postableSilence.
type postable struct {
	ID        string    `json:"id,omitempty"`
	Matchers  []Matcher `json:"matchers"`
	StartsAt  time.Time `json:"startsAt"`
	EndsAt    time.Time `json:"endsAt"`
	CreatedBy string    `json:"createdBy"`
	Comment   string    `json:"comment"`
}

// createdBy names rollboot as the silences' author in Alertmanager.
const createdBy = "rollboot"

// Create creates a silence from now to endsAt and returns its ID.
func (h *HTTP) Create(ctx context.Context, host string, ms []Matcher, now, endsAt time.Time) (string, error) {
	return h.post(ctx, postable{Matchers: ms, StartsAt: now, EndsAt: endsAt, CreatedBy: createdBy,
		Comment: fmt.Sprintf("rollboot: %s is out of service for its reboot", host)})
}

// Extend sets the end of silence id and returns its ID (another when
// Alertmanager replaced it); errGone when it no longer runs.
func (h *HTTP) Extend(ctx context.Context, id string, endsAt time.Time) (string, error) {
	s, err := h.get(ctx, id)
	if err != nil {
		return "", err
	}
	return h.post(ctx, postable{ID: s.ID, Matchers: s.Matchers, StartsAt: s.StartsAt, EndsAt: endsAt,
		CreatedBy: s.CreatedBy, Comment: s.Comment})
}

// End ends silence id now; one already gone or expired is ended.
func (h *HTTP) End(ctx context.Context, id string) error {
	if _, err := h.get(ctx, id); err != nil {
		if errors.Is(err, errGone) {
			return nil
		}
		return err
	}
	_, err := h.do(ctx, http.MethodDelete, h.url("silence", id), nil, nil)
	return err
}

// get reads silence id; errGone when Alertmanager has none or it expired.
func (h *HTTP) get(ctx context.Context, id string) (gettable, error) {
	var s gettable
	status, err := h.do(ctx, http.MethodGet, h.url("silence", id), nil, &s)
	switch {
	case status == http.StatusNotFound:
		return s, errGone
	case err != nil:
		return s, err
	case s.Status.State == "expired":
		return s, errGone
	}
	return s, nil
}

func (h *HTTP) post(ctx context.Context, p postable) (string, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	var answer struct {
		SilenceID string `json:"silenceID"`
	}
	if _, err := h.do(ctx, http.MethodPost, h.url("silences"), body, &answer); err != nil {
		return "", err
	}
	if answer.SilenceID == "" {
		return "", errors.New("Alertmanager answered without a silence ID")
	}
	return answer.SilenceID, nil
}

// url is the API path under the base URL ("" when the base does not parse).
func (h *HTTP) url(elem ...string) string {
	u, err := url.Parse(h.URL)
	if err != nil {
		return ""
	}
	return u.JoinPath(append([]string{"api", "v2"}, elem...)...).String()
}

// do sends a request and decodes a 200 answer into out (when not nil). It
// returns the status code; an error names the request without the URL's
// credentials.
func (h *HTTP) do(ctx context.Context, method, u string, body []byte, out any) (int, error) {
	if h.hc == nil {
		h.hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if u == "" {
		return 0, errors.New("invalid Alertmanager URL")
	}
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("invalid Alertmanager URL")
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	what := method + " " + httpcall.Redacted(u)
	resp, err := h.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %v", what, httpcall.Unwrapped(err))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("%s: HTTP %d: %s", what, resp.StatusCode, httpcall.FirstLine(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s: decode the answer: %v", what, err)
		}
	}
	return resp.StatusCode, nil
}
