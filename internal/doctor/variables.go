package doctor

import (
	"fmt"
	"strings"

	"github.com/rollboot/rollboot/internal/store"
)

// MaxVariableBytes is Nomad's limit on a Variable: the sum of its keys' and
// values' lengths (store.MaxVariableSize; a larger write is refused with 400
// "variables are limited to 64KiB in total size").
const MaxVariableBytes = store.MaxVariableSize

// DefaultVariableWarnBytes is the size from which a Variable is reported as
// near the limit: three quarters of it. From nine tenths it is an error: the
// next writes may be refused.
const DefaultVariableWarnBytes = MaxVariableBytes * 3 / 4

// checkVariables: no Variable of rollboot's nears Nomad's size limit.
func checkVariables(in VariablesInput, o Options) []Finding {
	if in.Err != nil {
		return []Finding{{Check: CheckVariables, Severity: Warning,
			What: fmt.Sprintf("cannot read rollboot's Variables under %s/: %v", o.Prefix, in.Err),
			Fix:  fmt.Sprintf("give the token read on %s/* in namespace %s (deploy/acl/rollboot-operator.policy.hcl)", o.Prefix, o.Namespace)}}
	}
	warn := o.VariableWarnBytes
	if warn <= 0 {
		warn = DefaultVariableWarnBytes
	}
	var out []Finding
	largest := VariableSize{}
	for _, v := range in.Sizes {
		if v.Bytes > largest.Bytes {
			largest = v
		}
		if v.Bytes < warn {
			continue
		}
		sev := Warning
		if v.Bytes >= MaxVariableBytes*9/10 {
			sev = Error
		}
		out = append(out, Finding{Check: CheckVariables, Severity: sev, Subject: v.Path,
			What: fmt.Sprintf("the Variable %s holds %s of Nomad's 64 KiB limit: writes to it fail beyond", v.Path, kib(v.Bytes)),
			Fix:  variableFix(v.Path, o)})
	}
	if len(out) == 0 {
		what := fmt.Sprintf("no Variable under %s/", o.Prefix)
		if len(in.Sizes) > 0 {
			what = fmt.Sprintf("%d Variables under %s/, the largest %s (%s) of Nomad's 64 KiB limit", len(in.Sizes), o.Prefix, largest.Path, kib(largest.Bytes))
		}
		out = append(out, Finding{Check: CheckVariables, What: what})
	}
	return out
}

func kib(n int) string { return fmt.Sprintf("%.1f KiB", float64(n)/1024) }

// variableFix says how to shrink the Variable at p.
func variableFix(p string, o Options) string {
	rest := strings.TrimPrefix(p, o.Prefix+"/")
	switch {
	case rest == "control":
		return "`rollboot control reset` moves the per-host entries out of it (one Variable per host)"
	case rest == "policy":
		return "shorten the policy file (it is stored whole, comments included), then `rollboot policy apply`"
	case strings.HasPrefix(rest, "hosts/"):
		return "the host's agent writes it: look at its reason and errors (`nomad var get -namespace " + o.Namespace + " " + p + "`)"
	}
	return "`nomad var get -namespace " + o.Namespace + " " + p + "` shows what it holds; report it as a rollboot bug"
}
