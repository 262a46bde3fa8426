package config

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// CapacityConfig is the policy's `capacity {}` block: before a drain, check that
// the other nodes have room for the allocations it moves (package capacity).
type CapacityConfig struct {
	Enabled bool
	// Headroom is the share of each node's capacity kept free, "0%" to "99%".
	Headroom string
}

// HeadroomPercent is Headroom as a whole number of percent (0 when it does not
// parse: Compile reports that).
func (c CapacityConfig) HeadroomPercent() int {
	n, _ := parseHeadroom(c.Headroom)
	return n
}

var headroomRE = regexp.MustCompile(`^([0-9]{1,2})%$`)

// parseHeadroom parses a headroom: a whole number of percent from "0%" to
// "99%".
func parseHeadroom(s string) (int, error) {
	m := headroomRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf(`invalid percentage %q: use a whole number of percent from "0%%" to "99%%"`, s)
	}
	return strconv.Atoi(m[1])
}

func (v *validator) capacity() {
	s := scope{"capacity", "capacity"}.sub("headroom")
	if _, err := parseHeadroom(v.c.Capacity.Headroom); err != nil && v.good(s) {
		v.errorf(s, "%v", err)
	}
}

func (c *Config) writeCapacity(root *hclwrite.Body) {
	b := root.AppendNewBlock("capacity", nil).Body()
	b.SetAttributeValue("enabled", cty.BoolVal(c.Capacity.Enabled))
	b.SetAttributeValue("headroom", cty.StringVal(c.Capacity.Headroom))
}
