package policy

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-bexpr"
	"github.com/hashicorp/go-bexpr/grammar"
	"github.com/hashicorp/nomad/api"
)

// DefaultGroupName is the group of the nodes that no configured group
// matches. It has a concurrency of 1, no max_unavailable and the default
// schedule.
const DefaultGroupName = "default"

// Group is a set of nodes selected by a filter, with its own budget and
// maintenance schedule.
type Group struct {
	// Name is the group's name.
	Name string
	// Filter selects the group's nodes, as `nomad node status -filter`
	// does. Nil matches every node. Build it with CompileFilter.
	Filter *bexpr.Evaluator
	// Concurrency is how many of the group's hosts rollboot may have out of
	// service at once. Zero or less admits nobody.
	Concurrency int
	// MaxUnavailablePct, when 1..100, further limits the hosts of the group
	// that may be unavailable at once, for any reason, to this percentage
	// of the group's nodes (see Slots). 0 means unset.
	MaxUnavailablePct int
	// Schedule holds the maintenance windows in which the group's drains
	// may start. An empty schedule is always open.
	Schedule Schedule
	// Freezes are the date ranges in which none of the group's drains start:
	// its own and the rollout-wide ones.
	Freezes Freezes
	// Settle is the least time between one of the group's hosts coming back
	// (its cycle ending) and the next one starting; 0: none.
	Settle time.Duration
	// HostsWithoutNode are the hosts without a Nomad node that the operator
	// put in this group (a group's nodes are otherwise chosen by Filter).
	HostsWithoutNode []string
}

// Calendar is when the group's drains may start: its windows less its freezes.
func (g Group) Calendar() Calendar { return Calendar{Schedule: g.Schedule, Freezes: g.Freezes} }

// FilterExpression returns the expression of the group's filter, as written in
// the configuration; "" when the group has no filter and matches every node.
func (g Group) FilterExpression() string {
	if g.Filter == nil {
		return ""
	}
	return g.Filter.Expression()
}

// Policy is what the coordinator decides with and what the FleetLock server
// maps its groups to: the configured groups and the group of the nodes that
// none of them matches. config.Compile builds it once at start.
type Policy struct {
	// Groups are the configured groups in match order: a node falls in the
	// first whose filter selects it.
	Groups []Group
	// Default is the group of the nodes that no group in Groups selects
	// (DefaultGroupName).
	Default Group
}

// Names returns the names of every group: Groups in order, then Default.
func (p Policy) Names() []string {
	names := make([]string, 0, len(p.Groups)+1)
	for _, g := range p.Groups {
		names = append(names, g.Name)
	}
	return append(names, p.Default.Name)
}

// nodeType is what filters are evaluated against.
var nodeType = reflect.TypeFor[api.Node]()

// CompileFilter compiles a go-bexpr expression evaluated against *api.Node,
// the way `nomad node status -filter` evaluates it: selectors are the Go
// field names of the node (NodePool, Datacenter, NodeClass, Name, Status,
// Meta.<key>, Attributes["<key>"], ...).
//
// Beyond the syntax, it checks that every selector names a field that
// exists, so that a typo such as `NodePol == "x"` is caught here and not
// reported for every node at run time. Map keys are not checked: nodes
// differ in their Meta and Attributes.
func CompileFilter(expr string) (*bexpr.Evaluator, error) {
	ev, err := bexpr.CreateEvaluator(expr)
	if err != nil {
		return nil, fmt.Errorf("invalid filter expression: %w", err)
	}
	ast, err := grammar.Parse("", []byte(expr))
	if err != nil {
		return nil, fmt.Errorf("invalid filter expression: %w", err)
	}
	if err := checkSelectors(ast.(grammar.Expression), nil); err != nil {
		return nil, err
	}
	return ev, nil
}

// identityFields are the node fields that say which node it is and where it
// belongs, which the node list shows too (api.NodeListStub) and which change
// only when the node registers again with another configuration.
var identityFields = map[string]bool{"ID": true, "Name": true, "NodePool": true, "Datacenter": true, "NodeClass": true}

// FilterOnIdentity reports whether a filter selects only on the node's
// identity fields (ID, Name, NodePool, Datacenter, NodeClass): then a node
// whose list entry shows the same values for them matches it as before,
// whatever else of the node changed (its status, drain, eligibility, meta). A
// filter that cannot be parsed, or selects on anything else (Meta,
// Attributes, Status, a collection), does not.
func FilterOnIdentity(expr string) bool {
	ast, err := grammar.Parse("", []byte(expr))
	if err != nil {
		return false
	}
	return onIdentity(ast.(grammar.Expression))
}

func onIdentity(e grammar.Expression) bool {
	switch e := e.(type) {
	case *grammar.UnaryExpression:
		return onIdentity(e.Operand)
	case *grammar.BinaryExpression:
		return onIdentity(e.Left) && onIdentity(e.Right)
	case *grammar.MatchExpression:
		return len(e.Selector.Path) == 1 && identityFields[e.Selector.Path[0]]
	}
	return false
}

// checkSelectors walks the expression and checks each selector against
// api.Node. locals are the names bound by enclosing collection expressions
// (`all Meta as k, v { ... }`), whose selectors are not checked.
func checkSelectors(e grammar.Expression, locals []string) error {
	switch e := e.(type) {
	case *grammar.UnaryExpression:
		return checkSelectors(e.Operand, locals)
	case *grammar.BinaryExpression:
		if err := checkSelectors(e.Left, locals); err != nil {
			return err
		}
		return checkSelectors(e.Right, locals)
	case *grammar.MatchExpression:
		return checkSelector(e.Selector.Path, locals)
	case *grammar.CollectionExpression:
		if err := checkSelector(e.Selector.Path, locals); err != nil {
			return err
		}
		nb := e.NameBinding
		inner := append(append([]string(nil), locals...), nb.Default, nb.Index, nb.Value)
		return checkSelectors(e.Inner, inner)
	}
	return nil
}

func checkSelector(path []string, locals []string) error {
	if len(path) == 0 {
		return nil
	}
	for _, l := range locals {
		if l != "" && path[0] == l {
			return nil
		}
	}
	t := nodeType
	for i, part := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := structField(t, part)
			if !ok {
				return fmt.Errorf("invalid filter selector %q: %s has no field %q", strings.Join(path, "."), typeName(t, path[:i]), part)
			}
			t = f.Type
		case reflect.Map:
			t = t.Elem()
		case reflect.Slice, reflect.Array:
			if _, err := strconv.Atoi(part); err != nil {
				return fmt.Errorf("invalid filter selector %q: %s is a list, index it with a number", strings.Join(path, "."), strings.Join(path[:i], "."))
			}
			t = t.Elem()
		case reflect.Interface:
			return nil
		default:
			return fmt.Errorf("invalid filter selector %q: %s is a %s, it has no field %q", strings.Join(path, "."), strings.Join(path[:i], "."), t.Kind(), part)
		}
	}
	return nil
}

// structField finds a field the way go-bexpr (through pointerstructure)
// does: a `bexpr` tag, else the exact exported Go field name.
func structField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if tag := f.Tag.Get("bexpr"); tag != "" {
			if tag == name {
				return f, true
			}
			continue
		}
		if f.Name == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func typeName(t reflect.Type, prefix []string) string {
	if len(prefix) == 0 {
		return "the node"
	}
	return fmt.Sprintf("%s (%s)", strings.Join(prefix, "."), t.Name())
}
