package nomadsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// ControlPrefix is the path under which every listener of the emulator serves
// its control API.
const ControlPrefix = controlPrefix

// ControlClient calls a running emulator's control API over HTTP: what `rollboot
// sim-ctl` and other processes use to drive simulated hosts (in-process code
// calls the *Sim methods of the same names).
type ControlClient struct {
	// Addr is the emulator's address, e.g. http://127.0.0.1:4646.
	Addr string
	// HTTP sends the requests; nil means http.DefaultClient.
	HTTP *http.Client
}

// ControlError is an answer of the control API that is not a success.
type ControlError struct {
	Method, Path string
	Code         int    // the HTTP status code
	Status       string // the HTTP status line, e.g. "404 Not Found"
	Body         string // the answer's body (its first 4 KiB), trimmed
}

func (e *ControlError) Error() string {
	return fmt.Sprintf("%s %s: %s: %s", e.Method, e.Path, e.Status, e.Body)
}

// Reboot reboots a simulated host (POST /sim/v1/hosts/<host>/reboot).
func (c ControlClient) Reboot(ctx context.Context, host string) (HostStatus, error) {
	var st HostStatus
	err := c.call(ctx, http.MethodPost, hostPath(host, "reboot"), nil, &st)
	return st, err
}

// SetRebootRequired creates a simulated host's reboot-required sentinel, with
// reason as its content ("" for the emulator's default), with PUT
// /sim/v1/hosts/<host>/reboot-required.
func (c ControlClient) SetRebootRequired(ctx context.Context, host, reason string) (HostStatus, error) {
	var body any
	if reason != "" {
		body = map[string]string{"reason": reason}
	}
	var st HostStatus
	err := c.call(ctx, http.MethodPut, hostPath(host, "reboot-required"), body, &st)
	return st, err
}

// ClearRebootRequired removes a simulated host's reboot-required sentinel
// (DELETE /sim/v1/hosts/<host>/reboot-required).
func (c ControlClient) ClearRebootRequired(ctx context.Context, host string) (HostStatus, error) {
	var st HostStatus
	err := c.call(ctx, http.MethodDelete, hostPath(host, "reboot-required"), nil, &st)
	return st, err
}

// SetPackagesNeeded makes a simulated host need a reboot for packages, as
// Debian does (PUT /sim/v1/hosts/<host>/packages).
func (c ControlClient) SetPackagesNeeded(ctx context.Context, host string, packages []string) (HostStatus, error) {
	var st HostStatus
	err := c.call(ctx, http.MethodPut, hostPath(host, "packages"), map[string][]string{"packages": packages}, &st)
	return st, err
}

// SetBootBlocked makes a simulated host fail to boot (true: a reboot takes it
// down for good) or boot again (false), with PUT or DELETE
// /sim/v1/hosts/<host>/boot-block.
func (c ControlClient) SetBootBlocked(ctx context.Context, host string, blocked bool) (HostStatus, error) {
	method := http.MethodPut
	if !blocked {
		method = http.MethodDelete
	}
	var st HostStatus
	err := c.call(ctx, method, hostPath(host, "boot-block"), nil, &st)
	return st, err
}

// Hosts lists every simulated host (GET /sim/v1/hosts).
func (c ControlClient) Hosts(ctx context.Context) ([]HostStatus, error) {
	var out []HostStatus
	err := c.call(ctx, http.MethodGet, ControlPrefix+"hosts", nil, &out)
	return out, err
}

func hostPath(host, op string) string {
	return ControlPrefix + "hosts/" + url.PathEscape(host) + "/" + op
}

// call sends one request with body as JSON (none when nil) and decodes a
// successful answer into out. A failed request returns the client's error as
// it is; an answer other than 2xx is a *ControlError.
func (c ControlClient) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Addr, "/")+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return &ControlError{Method: method, Path: path, Code: resp.StatusCode, Status: resp.Status,
			Body: strings.TrimSpace(string(b))}
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}
