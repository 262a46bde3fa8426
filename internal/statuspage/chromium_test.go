package statuspage_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/demo"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/syncbuf"
)

// chromium finds the browser; without one the test is skipped, unless
// ROLLBOOT_REQUIRE_CHROMIUM is set (as CI does), when it fails.
func chromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no browser; the full suite (go test -race ./...) loads the page in chromium")
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("ROLLBOOT_REQUIRE_CHROMIUM") != "" {
		t.Fatal("chromium is not installed and ROLLBOOT_REQUIRE_CHROMIUM is set (apt-get install chromium)")
	}
	t.Skip("chromium is not installed (apt-get install chromium); set ROLLBOOT_REQUIRE_CHROMIUM to fail instead")
	return ""
}

// browser starts headless Chromium (closed network, fresh profile) until ctx ends.
func browser(t *testing.T, ctx context.Context, exe string) context.Context {
	t.Helper()
	actx, acancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1500, 1000))
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(func() { bcancel(); acancel() })
	return bctx
}

// freeAddr is a localhost address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// kindsJS counts, for every host row on the page, its bars of each kind, and
// the open bars (cycles under way, drawn up to now).
const kindsJS = `(() => {
  const out = {hosts: {}, open: document.querySelectorAll(".row .bar.open").length, live: document.getElementById("conn").textContent};
  for (const r of document.querySelectorAll(".row")) {
    const n = {};
    for (const b of r.querySelectorAll(".bar")) n[b.dataset.kind] = (n[b.dataset.kind] || 0) + 1;
    out.hosts[r.dataset.host] = n;
  }
  return out;
})()`

type pageState struct {
	Hosts map[string]map[string]int `json:"hosts"`
	Open  int                       `json:"open"`
	Live  string                    `json:"live"`
}

// cyclesShown waits until the page shows at least n finished cycles of every
// host, each with its drain, reboot and rejoin bars, and none under way; it
// returns the last state read and whether a cycle under way was ever seen.
//
// shot, if not nil, is called once when two cycles or more are under way.
func cyclesShown(t *testing.T, bctx context.Context, n int, out *syncbuf.Buffer, shot func()) (pageState, bool) {
	t.Helper()
	var st pageState
	sawOpen := false
	waitFor(t, 3*time.Minute, func() bool {
		s, err := chromedp.Run(bctx, chromedp.Evaluate[pageState](kindsJS))
		if err != nil {
			t.Logf("read the page: %v", err)
			return false
		}
		st = s
		sawOpen = sawOpen || s.Open > 0
		if shot != nil && s.Open >= 2 {
			shot()
			shot = nil
		}
		if len(s.Hosts) < 11 || s.Open > 0 {
			return false
		}
		for _, kinds := range s.Hosts {
			for _, k := range []string{"drain", "reboot", "rejoin"} {
				if kinds[k] < n {
					return false
				}
			}
		}
		return true
	}, func() { t.Logf("last state of the page: %+v\ndemo output:\n%s", st, out.String()) })
	return st, sawOpen
}

// TestPageInChromium runs the demo (real agents and coordinator against the
// emulator, kept running) with its status page, loads the page in headless
// Chromium, asks for a reboot of every host and waits, without reloading, until
// the timeline shows every host's second drain, reboot and rejoin: the live
// updates carried them. It then checks the filter and the group collapse, and saves a
// screenshot (docs/img/status-page.png is one).
func TestPageInChromium(t *testing.T) {
	exe := chromium(t)
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncbuf.Buffer{}
	type result struct {
		sum *demo.Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := demo.Run(ctx, demo.Options{Out: out, UI: addr, Keep: true, Timeout: 3 * time.Minute})
		done <- result{sum, err}
	}()
	url := "http://" + addr + "/"
	// The demo starts an emulator and a dozen agents first: on a loaded
	// machine that alone has taken more than 30s.
	waitFor(t, 2*time.Minute, func() bool {
		resp, err := http.Get(url + "api/status")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, func() { t.Logf("the page never answered; demo output:\n%s", out.String()) })

	bctx := browser(t, ctx, exe)
	if err := chromedp.Do(bctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("load the page: %v", err)
	}

	// The demo's rollout is over in seconds, maybe before the browser
	// started: wait for it, then ask for a reboot of every host (as
	// `rollboot request` does) and watch that second rollout live.
	st, _ := cyclesShown(t, bctx, 1, out, nil)
	requestAll(t, out.String(), st)
	st, sawOpen := cyclesShown(t, bctx, 2, out, func() { screenshot(t, bctx, "status-page.png") })
	if !sawOpen {
		t.Error("the page never showed the second rollout under way: no live update")
	}
	if st.Live != "live" {
		t.Errorf("connection indicator %q, want live", st.Live)
	}
	names := make([]string, 0, len(st.Hosts))
	for h, kinds := range st.Hosts {
		names = append(names, fmt.Sprintf("%s=%v", h, kinds))
	}
	sort.Strings(names)
	t.Logf("bars per host: %s", strings.Join(names, " "))

	screenshot(t, bctx, "status-page-done.png")
	checkFilterAndCollapse(t, bctx)

	cancel()
	r := <-done
	if r.err != nil {
		t.Fatalf("demo: %v\n%s", r.err, out.String())
	}
	if !r.sum.OK() {
		t.Errorf("the demo's checks failed:\n%s", out.String())
	}
}

// checkFilterAndCollapse types a host's name in the filter (only its row stays
// shown) and collapses its group.
func checkFilterAndCollapse(t *testing.T, bctx context.Context) {
	t.Helper()
	if err := chromedp.Do(bctx, chromedp.SendKeys("#filter", "client-3")); err != nil {
		t.Fatal(err)
	}
	visible := `[...document.querySelectorAll(".row")].filter((r) => !r.hidden).map((r) => r.dataset.host).join(",")`
	var got string
	waitFor(t, 10*time.Second, func() bool {
		got, _ = chromedp.Run(bctx, chromedp.Evaluate[string](visible))
		return got == "client-3"
	}, func() { t.Logf("rows shown with the filter: %q", got) })
	group := `document.querySelector('.row[data-host="client-3"]').closest("details")`
	if err := chromedp.Do(bctx, chromedp.Evaluate[chromedp.Void](group+`.querySelector("summary").click()`)); err != nil {
		t.Fatal(err)
	}
	open, err := chromedp.Run(bctx, chromedp.Evaluate[bool](group+`.open`))
	if err != nil || open {
		t.Errorf("group of client-3 still open after a click on its title (err %v)", err)
	}
}

// screenshot saves a screenshot of the page in the test's artifact directory
// (go test -artifacts keeps it).
func screenshot(t *testing.T, bctx context.Context, name string) {
	t.Helper()
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(shot))
}

// requestAll asks for a reboot of every host on the page, in the cluster the
// demo keeps running (its NOMAD_ADDR is in the demo's output).
func requestAll(t *testing.T, out string, st pageState) {
	t.Helper()
	m := regexp.MustCompile(`export NOMAD_ADDR=(\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no NOMAD_ADDR in the demo's output:\n%s", out)
	}
	c, err := api.NewClient(&api.Config{Address: m[1]})
	if err != nil {
		t.Fatal(err)
	}
	s := store.New(c.Variables(), "rollboot", "")
	_, err = s.UpdateControl(context.Background(), func(ctl *store.Control) error {
		if ctl.Requests == nil {
			ctl.Requests = map[string]store.Request{}
		}
		for h := range st.Hosts {
			ctl.Requests[h] = store.Request{At: time.Now().UTC(), By: "TestPageInChromium", Reason: "second rollout"}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("request reboots: %v", err)
	}
}

// waitFor polls cond until it holds or d passes; then it calls the reports and fails.
func waitFor(t *testing.T, d time.Duration, cond func() bool, report ...func()) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			for _, r := range report {
				r()
			}
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
