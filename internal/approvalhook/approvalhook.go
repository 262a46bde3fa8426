// Package approvalhook asks the policy's approval webhook whether a host
// whose turn came may go (a group's approval = "webhook"): a POST of the
// host, its group, the reason of its need and its fingerprint as JSON, whose
// 2xx answer approves. Anything else holds: another status, no answer in
// time, a URL that cannot be reached, a secret that cannot be read (fail
// closed). The answer as shown (status and first line of the body) never
// holds the secret or the URL's credentials.
package approvalhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/httpcall"
)

// Request is the body POSTed for one host.
type Request struct {
	Host        string `json:"host"`
	Group       string `json:"group"`
	Reason      string `json:"reason"`
	Fingerprint string `json:"fingerprint"`
}

// Hook is the approval webhook (the policy's approval block).
type Hook struct {
	URL     string
	Timeout time.Duration
	// Header carries the secret read from the environment variable Env or
	// the file File (neither: no secret is sent).
	Header, Env, File string
	hc                *http.Client
}

// maxBody bounds the part of an answer read.
const maxBody = 64 << 10

// Ask asks the webhook about r at now and returns its answer.
func (h *Hook) Ask(ctx context.Context, r Request, now time.Time) admission.WebhookAnswer {
	ans := admission.WebhookAnswer{At: now}
	secret, err := h.secret()
	if err != nil {
		ans.Answer = err.Error()
		return ans
	}
	status, line, err := h.post(ctx, r, secret)
	if err != nil {
		ans.Answer = scrub(err.Error(), secret, h.URL)
		return ans
	}
	ans.Approved = status >= 200 && status < 300
	ans.Answer = scrub(fmt.Sprintf("HTTP %d", status), secret, h.URL)
	if line != "" {
		ans.Answer += ": " + scrub(line, secret, h.URL)
	}
	return ans
}

// secret reads the secret sent in Header ("" when none is configured).
func (h *Hook) secret() (string, error) {
	switch {
	case h.Env != "":
		v, ok := os.LookupEnv(h.Env)
		if !ok || v == "" {
			return "", fmt.Errorf("the webhook's secret cannot be read: environment variable %s is not set on the coordinator", h.Env)
		}
		return v, nil
	case h.File != "":
		b, err := os.ReadFile(h.File)
		if err != nil {
			return "", fmt.Errorf("the webhook's secret cannot be read: %v", pathErr(err))
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("the webhook's secret cannot be read: %s is empty", h.File)
		}
		return v, nil
	}
	return "", nil
}

// pathErr is a file's read error without the contents of anything.
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", pe.Path, pe.Err)
	}
	return err
}

// post sends the request and returns the answer's status and first line.
func (h *Hook) post(ctx context.Context, r Request, secret string) (int, string, error) {
	if h.hc == nil {
		h.hc = httpcall.NoRedirects()
	}
	body, err := json.Marshal(r)
	if err != nil {
		return 0, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return 0, "", errors.New("invalid webhook URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "rollboot")
	if secret != "" {
		req.Header.Set(h.Header, secret)
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return 0, "", fmt.Errorf("no answer within %s", h.Timeout)
		}
		return 0, "", fmt.Errorf("%s unreachable: %v", httpcall.Redacted(h.URL), httpcall.Unwrapped(err))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	return resp.StatusCode, httpcall.FirstLine(b), nil
}

// scrub masks the secret and the URL's credentials in s.
func scrub(s, secret, raw string) string {
	hide := []string{secret}
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		p, _ := u.User.Password()
		hide = append(hide, p, u.User.Username())
	}
	for _, x := range hide {
		if len(x) >= 3 {
			s = strings.ReplaceAll(s, x, "xxxxx")
		}
	}
	return s
}
