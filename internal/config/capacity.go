package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
)

// CapacityConfig is the policy's `capacity {}` block: before a drain, check that
// the other nodes have room for the allocations it moves (package capacity).
type CapacityConfig struct {
	Enabled bool
	// Headroom is the share of each node's capacity kept free, "0%" to "99%".
	Headroom string
}

var capacityTable = &table{typ: "capacity", of: reflect.TypeFor[CapacityConfig](), settings: []setting{
	{name: "enabled", field: "Enabled", def: true,
		doc: "Check the room before each drain. On by default: a drain whose allocations fit nowhere stops " +
			"them with nothing to replace them (Nomad leaves them unplaced, blocked) until the node comes " +
			"back."},
	{name: "headroom", field: "Headroom", def: "0%", check: value(headroom),
		doc: "Share of each node's CPU and memory kept free: a node with `8 GiB` and `headroom = \"25%\"` " +
			"offers `6 GiB` less what runs on it. A whole number of percent from `\"0%\"` to `\"99%\"`."},
}}

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

func headroom(s string) error {
	_, err := parseHeadroom(s)
	return err
}
