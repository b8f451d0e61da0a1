package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// daysFlag is a duration flag that also takes whole days ("7d") and
// weeks ("2w"), besides Go's units ("36h", "90m"); 0 turns it off.
type daysFlag time.Duration

func (d *daysFlag) String() string {
	v := time.Duration(*d)
	if v > 0 && v%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(v/(24*time.Hour)), 10) + "d"
	}
	return v.String()
}

func (d *daysFlag) Set(s string) error {
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			k, err := strconv.ParseUint(n, 10, 32)
			if err != nil {
				return fmt.Errorf("want a whole number of days or weeks (7d, 2w) or a Go duration (36h), not %q", s)
			}
			*d = daysFlag(time.Duration(k) * unit)
			return nil
		}
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("want a whole number of days or weeks (7d, 2w) or a Go duration (36h), not %q", s)
	}
	*d = daysFlag(v)
	return nil
}
