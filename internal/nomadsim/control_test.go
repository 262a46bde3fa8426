package nomadsim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// ctl sends a control API request and decodes the JSON answer into out (may be nil).
func ctl(t *testing.T, method, url, body string, out any) int {
	t.Helper()
	req, err := newJSONRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	code, resp := doRaw(t, req)
	if out != nil {
		if err := json.Unmarshal([]byte(resp), out); err != nil {
			t.Fatalf("%s %s: bad JSON %q: %v", method, url, resp, err)
		}
	}
	return code
}

func TestControlAPI(t *testing.T) {
	s, c := newTestSim(t, Config{Servers: 1, Clients: 2, ACL: true, HeartbeatTTL: 50 * time.Millisecond, BootTime: 100 * time.Millisecond})
	ctx := testCtx(t)
	base := s.Address() + controlPrefix

	var hosts []HostStatus
	if code := ctl(t, "GET", base+"hosts", "", &hosts); code != 200 || len(hosts) != 3 {
		t.Fatalf("hosts: %d %+v", code, hosts)
	}
	if hosts[0].Name != "server-1" || hosts[0].Server == nil || hosts[0].NodeID != "" ||
		hosts[1].Name != "client-1" || hosts[1].NodeID == "" || hosts[1].NodeStatus != "ready" || !hosts[1].Up {
		t.Fatalf("hosts %+v", hosts)
	}

	// Served on every listener, without a token, and never faulted.
	var one HostStatus
	if code := ctl(t, "GET", "http://"+hosts[1].Addr+controlPrefix+"hosts/client-1", "", &one); code != 200 || one.Name != "client-1" {
		t.Fatalf("host on its own listener: %d %+v", code, one)
	}
	var e map[string]string
	if code := ctl(t, "GET", base+"hosts/nope", "", &e); code != 404 || !strings.Contains(e["error"], "not found") {
		t.Fatalf("unknown host: %d %v", code, e)
	}
	if code := ctl(t, "GET", base+"nothing", "", &e); code != 404 || e["error"] == "" {
		t.Fatalf("unknown endpoint: %d %v", code, e)
	}
	if code := ctl(t, "DELETE", base+"hosts", "", &e); code != 405 || e["error"] == "" {
		t.Fatalf("bad method: %d %v", code, e)
	}
	req, _ := newJSONRequest("DELETE", base+"hosts/client-1/reboot", "")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST, PUT" {
		t.Fatalf("bad method on a host: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if code := ctl(t, "POST", base+"hosts/nope/reboot", "", &e); code != 404 || !strings.Contains(e["error"], "not found") {
		t.Fatalf("reboot of an unknown host: %d %v", code, e)
	}
	if code := ctl(t, "POST", base+"consul/servers/server-1/seal", "", &e); code != 404 {
		t.Fatalf("consul has no seal: %d %v", code, e)
	}

	// Sentinel.
	if code := ctl(t, "PUT", base+"hosts/client-1/reboot-required", `{"reason":"kernel"}`, &one); code != 200 || !one.RebootRequired {
		t.Fatalf("set sentinel: %d %+v", code, one)
	}
	if !s.RebootRequired("client-1") {
		t.Fatal("sentinel not created")
	}
	if code := ctl(t, "DELETE", base+"hosts/client-1/reboot-required", "", &one); code != 200 || one.RebootRequired || s.RebootRequired("client-1") {
		t.Fatalf("clear sentinel: %d %+v", code, one)
	}

	// Reboot.
	if code := ctl(t, "POST", base+"hosts/client-2/reboot", "", &one); code != 200 || one.Up {
		t.Fatalf("reboot: %d %+v", code, one)
	}
	if code := ctl(t, "POST", base+"hosts/client-2/reboot", "", &e); code != 400 || !strings.Contains(e["error"], "down") {
		t.Fatalf("second reboot: %d %v", code, e)
	}
	if err := s.WaitFor(ctx, func(v *View) bool { h, _ := v.Host("client-2"); return h.Boots == 1 }); err != nil {
		t.Fatal(err)
	}

	// Faults: durations as Go strings; the Nomad API is faulted, the control API not.
	var faults []map[string]any
	if code := ctl(t, "POST", base+"faults", `{"path_prefix":"/v1/nodes","error_rate":1,"status":503,"latency":"5ms"}`, &faults); code != 200 ||
		len(faults) != 1 || faults[0]["latency"] != "5ms" || faults[0]["status"] != float64(503) {
		t.Fatalf("inject: %d %v", code, faults)
	}
	_, _, err := c.Nodes().List(nil)
	wantStatus(t, err, 503, "")
	if code := ctl(t, "GET", base+"hosts", "", nil); code != 200 {
		t.Fatalf("control API faulted: %d", code)
	}
	if code := ctl(t, "POST", base+"faults", `{"error_rate":2}`, &e); code != 400 {
		t.Fatalf("bad fault: %d %v", code, e)
	}
	if code := ctl(t, "POST", base+"faults", `{"latency":"soon"}`, &e); code != 400 {
		t.Fatalf("bad latency: %d %v", code, e)
	}
	if code := ctl(t, "DELETE", base+"faults", "", &faults); code != 200 || len(faults) != 0 {
		t.Fatalf("clear: %d %v", code, faults)
	}
	if _, _, err := c.Nodes().List(nil); err != nil {
		t.Fatal(err)
	}

	// Leader and server health (the server state is another file's; only the
	// routing and validation are checked here).
	if code := ctl(t, "PUT", base+"leader?lost=maybe", "", &e); code != 400 {
		t.Fatalf("leader bad param: %d", code)
	}
	if code := ctl(t, "PUT", base+"leader?lost=false", "", nil); code != 200 {
		t.Fatalf("leader: %d", code)
	}
	if code := ctl(t, "PUT", base+"servers/server-1/health?healthy=true", "", nil); code != 200 {
		t.Fatalf("health: %d", code)
	}
	if code := ctl(t, "PUT", base+"servers/client-1/health?healthy=false", "", &e); code != 400 {
		t.Fatalf("health of a client: %d %v", code, e)
	}
	if code := ctl(t, "PUT", base+"servers/nope/health?healthy=false", "", &e); code != 404 {
		t.Fatalf("health of unknown host: %d %v", code, e)
	}

	// Jobs.
	var jobs []JobSpec
	if code := ctl(t, "POST", base+"jobs", `{"id":"report","type":"batch","run_time":"1h","groups":[{"name":"g","count":2}]}`, &jobs); code != 200 ||
		len(jobs) != 1 || jobs[0].RunTime != time.Hour || jobs[0].Groups[0].MigrateMaxParallel != 1 {
		t.Fatalf("add job: %d %+v", code, jobs)
	}
	if code := ctl(t, "POST", base+"jobs", `{"id":"report","type":"batch"}`, &e); code != 400 || !strings.Contains(e["error"], "exists") {
		t.Fatalf("duplicate job: %d %v", code, e)
	}
	if code := ctl(t, "POST", base+"jobs", `{"id":"x","type":"cron"}`, &e); code != 400 {
		t.Fatalf("bad type: %d %v", code, e)
	}
	err = s.WaitFor(ctx, func(v *View) bool {
		n := 0
		for _, a := range v.Allocs("") {
			if a.JobID == "report" && a.ClientStatus == api.AllocClientStatusRunning {
				n++
			}
		}
		return n == 2
	})
	if err != nil {
		t.Fatal(err)
	}

	// Events, with after=N.
	var events []Event
	if code := ctl(t, "GET", base+"events", "", &events); code != 200 || len(events) == 0 {
		t.Fatalf("events: %d", code)
	}
	var tail []Event
	after := events[len(events)-3].Seq
	if code := ctl(t, "GET", base+"events?after="+strconv.Itoa(after), "", &tail); code != 200 || len(tail) < 2 || tail[0].Seq != after+1 {
		t.Fatalf("events after %d: %+v", after, tail)
	}
	if code := ctl(t, "GET", base+"events?after=x", "", &e); code != 400 {
		t.Fatalf("bad after: %d", code)
	}
	seen := map[string]bool{}
	for _, ev := range events {
		seen[ev.Type] = true
	}
	for _, typ := range []string{EventHostRebootNeeded, EventHostRebootStart, EventHostBoot, EventNodeDown, EventNodeReady, EventFault, EventAllocPlace} {
		if !seen[typ] {
			t.Errorf("no %s event", typ)
		}
	}
}

func TestFaultJSON(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{`{"latency":"50ms"}`, 50 * time.Millisecond, true},
		{`{"latency":1000}`, time.Microsecond, true},
		{`{}`, 0, true},
		{`{"latency":"fast"}`, 0, false},
		{`{"latency":true}`, 0, false},
	} {
		var f Fault
		err := json.Unmarshal([]byte(tc.in), &f)
		if (err == nil) != tc.ok || f.Latency != tc.want {
			t.Errorf("%s: %v, %v", tc.in, f.Latency, err)
		}
	}
	b, _ := json.Marshal(Fault{PathPrefix: "/v1/", Latency: 2 * time.Second})
	if !strings.Contains(string(b), `"latency":"2s"`) {
		t.Errorf("marshal: %s", b)
	}
}
