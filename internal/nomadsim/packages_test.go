package nomadsim

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A packages need writes Debian's two files under the host's folder, through
// the control API too, and a boot removes them (/run is a tmpfs); a host whose
// boot is blocked through the control API stays down until the block is lifted.
func TestPackagesNeedAndBootBlock(t *testing.T) {
	s, _ := newTestSim(t, Config{Servers: 1, Clients: 1, BootTime: 10 * time.Millisecond})
	ctx := testCtx(t)
	cc := ControlClient{Addr: s.Address(), HTTP: http.DefaultClient}
	if _, err := cc.SetPackagesNeeded(ctx, "client-1", []string{"linux-image-6.8.0-51-generic", "libc6"}); err != nil {
		t.Fatal(err)
	}
	h, _ := s.Host("client-1")
	pkgs, err := os.ReadFile(filepath.Join(h.Dir, "var/run/reboot-required.pkgs"))
	if err != nil || string(pkgs) != "linux-image-6.8.0-51-generic\nlibc6\n" {
		t.Fatalf("packages file %q, %v", pkgs, err)
	}
	if _, err := cc.SetBootBlocked(ctx, "client-1", true); err != nil {
		t.Fatal(err)
	}
	if err := s.Reboot("client-1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // ten boot times: the boot is held back
	if v, _ := s.Host("client-1"); v.Up {
		t.Fatal("a host whose boot is blocked came back")
	}
	if _, err := cc.SetBootBlocked(ctx, "client-1", false); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(ctx, func(v *View) bool { x, _ := v.Host("client-1"); return x.Up && x.Boots == 1 }); err != nil {
		t.Fatal(err)
	}
	for _, f := range debianRunFiles {
		if _, err := os.Stat(filepath.Join(h.Dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s after the boot: %v", f, err)
		}
	}
	if _, err := cc.SetPackagesNeeded(ctx, "client-1", nil); err == nil {
		t.Error("a need with no packages was accepted")
	}
}
