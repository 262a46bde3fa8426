package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// check says what is wrong with the value of a setting (nil: nothing), in
// words that follow the setting's name: "must be greater than 0, got 0s". in
// gives the other settings of its block, for the rules that tie two of them.
// Errors joined (errors.Join) are reported one by one; an elemError is about
// one element of a list.
type check func(val any, in siblings) error

// value makes a check of a function of the value alone.
func value[T any](f func(T) error) check {
	return func(val any, _ siblings) error { return f(val.(T)) }
}

// elemError is what is wrong with one element of a list.
type elemError struct {
	i       int
	err     error
	indexed bool // the message names the element: "agent.pass_env[1]"
	atList  bool // positioned at the list rather than at the element
}

func (e *elemError) Error() string { return e.err.Error() }

// elem is the error err about the element i of a list.
func elem(i int, err error) error { return &elemError{i: i, err: err} }

// Where each reports what is wrong with an element.
const (
	atElement        = iota // at the element, named as the list
	atElementIndexed        // at the element, named with its index (for values a message does not quote)
	atList                  // at the list
)

// each checks every element of a list with f.
func each[T any](where int, f func(T) error) check {
	return value(func(list []T) error {
		var errs []error
		for i, x := range list {
			if err := f(x); err != nil {
				errs = append(errs, &elemError{i: i, err: err, indexed: where == atElementIndexed, atList: where == atList})
			}
		}
		return errors.Join(errs...)
	})
}

func positive(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("must be greater than 0, got %s", FormatDuration(d))
	}
	return nil
}

func nonNegative(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("must not be negative, got %s", FormatDuration(d))
	}
	return nil
}

// atLeast is a whole number from least, why the limit in note.
func atLeast(least int, note string) func(int) error {
	return func(n int) error {
		if n < least {
			return fmt.Errorf("must be at least %d, got %d%s", least, n, note)
		}
		return nil
	}
}

// oneOf is one of the values: what is the value's kind in the message ("":
// none).
func oneOf(what string, values ...string) func(string) error {
	quoted := make([]string, len(values))
	for i, s := range values {
		quoted[i] = strconv.Quote(s)
	}
	use := strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
	return func(s string) error {
		for _, v := range values {
			if s == v {
				return nil
			}
		}
		if what == "" {
			return fmt.Errorf("%q: use %s", s, use)
		}
		return fmt.Errorf("unknown %s %q: use %s", what, s, use)
	}
}

// optional is f for a string that may be "" (off).
func optional(f func(string) error) func(string) error {
	return func(s string) error {
		if s == "" {
			return nil
		}
		return f(s)
	}
}

// requiredPath is an absolute path, note saying why.
func requiredPath(note string) func(string) error {
	return func(p string) error {
		switch {
		case p == "":
			return fmt.Errorf("must not be empty: give an absolute path%s", note)
		case !strings.HasPrefix(p, "/"):
			return fmt.Errorf("%q must be an absolute path%s", p, note)
		}
		return nil
	}
}

// optionalPath is an absolute path or "", which emptyMeans.
func optionalPath(emptyMeans string) func(string) error {
	return optional(func(p string) error {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("%q must be an absolute path (or \"\" %s)", p, emptyMeans)
		}
		return nil
	})
}

// pairedWith is for a setting that goes with the setting other: both or
// neither.
func pairedWith(other string) check {
	return func(val any, in siblings) error {
		if o, _ := in.get(other); val != "" && o == "" {
			return fmt.Errorf("%s is set but %s is not: set both or neither", in.self, other)
		}
		return nil
	}
}

// notBelow is for a maximum of the setting base.
func notBelow(base string) check {
	return func(val any, in siblings) error {
		b, ok := in.get(base)
		if m := val.(time.Duration); ok && m < b.(time.Duration) {
			return fmt.Errorf("%s is less than %s (%s)", FormatDuration(m), in.name(base), FormatDuration(b.(time.Duration)))
		}
		return nil
	}
}

// argvProgram is for an argv: its program, if any, is not "".
func argvProgram(val any, in siblings) error {
	if argv := val.([]string); len(argv) > 0 && argv[0] == "" {
		return fmt.Errorf("the program (first element) of %s must not be empty", in.self)
	}
	return nil
}
