package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every command says what is wrong with its arguments in its own words: what
// is missing (the HOST or FILE of its usage, with the command to type) or
// that it takes none, never cobra's "accepts 1 arg(s), received 0" or
// "unknown command".
func TestArgumentErrorsSayWhatIsMissing(t *testing.T) {
	placeholder := regexp.MustCompile(`\b[A-Z]{2,}\b`)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.Runnable() || c.Name() == "help" || c.Name() == "completion" || c.DisableFlagParsing {
			return
		}
		path := c.CommandPath()
		t.Run(path, func(t *testing.T) {
			if c.Args == nil {
				t.Fatalf("%s takes any argument: give it Args", path)
			}
			arg := placeholder.FindString(c.Use)
			required := arg != "" && !strings.Contains(c.Use, "["+arg+"]")
			check := func(args []string, want ...string) {
				err := c.Args(c, args)
				if err == nil {
					t.Fatalf("%s %q: no error", path, args)
				}
				for _, w := range append(want, path) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s %q: %q lacks %q", path, args, err, w)
					}
				}
				for _, bad := range []string{"accepts", "received", "unknown command"} {
					if strings.Contains(err.Error(), bad) {
						t.Errorf("%s %q: cobra's words: %q", path, args, err)
					}
				}
			}
			if required {
				check(nil, arg, path+" "+arg)
			}
			check([]string{"a", "b", "c"})
		})
	}
	walk(newRootCmd())
}
