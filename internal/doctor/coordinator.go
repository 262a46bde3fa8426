package doctor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/storedpolicy"
)

// CoordinatorInput is the stored rollout policy and what the leading
// coordinator last said of itself.
type CoordinatorInput struct {
	Skipped bool // not read: the leader checking itself
	Policy  store.PolicyRecord
	// PolicyErr is why the stored policy cannot be read (store.ErrNotFound:
	// none is stored); CompileErr why the one stored cannot be used.
	PolicyErr, CompileErr error
	Enforcement           store.Enforcement
	EnforcementErr        error
	// LockIndex is the election lock's index now (LockErr: why it cannot be
	// read; store.ErrNotFound: there is none).
	LockIndex uint64
	LockErr   error
}

// readCoordinator reads the stored policy, compiles it as the coordinator
// does, and reads the leader's word and the election lock.
func readCoordinator(ctx context.Context, st *store.Store) CoordinatorInput {
	var in CoordinatorInput
	in.Policy, in.PolicyErr = st.Policy(ctx)
	if in.PolicyErr == nil {
		_, in.CompileErr = storedpolicy.Compile(in.Policy)
	}
	in.Enforcement, in.EnforcementErr = st.Enforcement(ctx)
	in.LockIndex, in.LockErr = st.LeaderLockIndex(ctx)
	return in
}

const coordinatorFix = "start the coordinator: `nomad job run deploy/nomad/rollboot-coordinator.nomad.hcl`, or `nomad job status rollboot-coordinator` to see why it stopped"

// checkCoordinator: a usable rollout policy, and a coordinator that leads.
func checkCoordinator(in CoordinatorInput, now time.Time) []Finding {
	if in.Skipped {
		return nil
	}
	return append(checkStoredPolicy(in), checkLeader(in, now))
}

func checkStoredPolicy(in CoordinatorInput) []Finding {
	f := Finding{Check: CheckCoordinator, Subject: "policy"}
	switch {
	case errors.Is(in.PolicyErr, store.ErrNotFound):
		f.Severity = Info
		f.What = "no rollout policy is stored: the coordinator uses the safe default (one host at a time in one group, no window)"
		f.Fix = "write yours from deploy/policy.hcl, preview it with `rollboot plan -policy FILE`, and store it with `rollboot policy apply FILE`"
	case in.PolicyErr != nil:
		f.Severity = Error
		f.What = fmt.Sprintf("the stored rollout policy cannot be read: %v: no new reboot starts", in.PolicyErr)
		f.Fix = "store a valid policy: `rollboot policy apply FILE`"
	case in.CompileErr != nil:
		f.Severity = Error
		f.What = fmt.Sprintf("the stored rollout policy (version %d) cannot be used: %v: no new reboot starts", in.Policy.Version, in.CompileErr)
		f.Fix = "fix the file and store it again: `rollboot policy apply FILE`"
	default:
		f.What = fmt.Sprintf("rollout policy version %d is stored", in.Policy.Version)
	}
	return []Finding{f}
}

func checkLeader(in CoordinatorInput, now time.Time) Finding {
	f := Finding{Check: CheckCoordinator, Subject: "leader", Severity: Error, Fix: coordinatorFix}
	e := in.Enforcement
	switch {
	case errors.Is(in.EnforcementErr, store.ErrNotFound):
		f.What = "no coordinator has ever led here: nothing is rebooted"
	case in.EnforcementErr != nil:
		f.Severity = Warning
		f.What = fmt.Sprintf("cannot tell whether a coordinator leads: %v", in.EnforcementErr)
		f.Fix = "give the token read on the state's Variables (deploy/acl/rollboot-operator.policy.hcl)"
	case errors.Is(in.LockErr, store.ErrNotFound) || e.LockIndex != 0 && in.LockErr == nil && in.LockIndex != e.LockIndex:
		f.What = fmt.Sprintf("no coordinator leads: %s, the last to lead (since %s), no longer holds the election lock: nothing new is rebooted",
			e.Leader, e.Since.Round(time.Second).Format(time.RFC3339))
	case e.PolicyProblem != "":
		f.What = fmt.Sprintf("the leading coordinator %s cannot use the stored policy: %s: no new reboot starts", e.Leader, e.PolicyProblem)
		f.Fix = "fix the policy and store it again: `rollboot policy apply FILE`"
	default:
		f.Severity, f.Fix = OK, ""
		f.What = fmt.Sprintf("coordinator %s leads (since %s ago)", e.Leader, now.Sub(e.Since).Round(time.Second))
	}
	return f
}
