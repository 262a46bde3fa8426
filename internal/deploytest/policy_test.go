package deploytest

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/storedpolicy"
)

// The shipped example policy passes `rollboot policy validate`, and says what
// the default deployment expects.
func TestShippedPolicy(t *testing.T) {
	path := deployPath("policy.hcl")
	r, err := storedpolicy.Check(read(t, path), path)
	if err != nil {
		t.Fatal(err)
	}
	p := r.Policy()
	if strings.Join(p.Names(), ",") != "all,default" || p.Groups[0].Concurrency != 1 || p.Groups[0].Settle != 2*time.Minute {
		t.Errorf("groups %v: %+v", p.Names(), p.Groups)
	}
}
