package mlcore

import (
	"fmt"
	"strconv"
	"strings"
)

// osVersion is a macOS version, major.minor.patch.
type osVersion [3]int

// parseOSVersion reads "15", "15.1" or "15.1.1" (sysctl kern.osproductversion).
func parseOSVersion(s string) (osVersion, error) {
	var v osVersion
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) == 0 || len(parts) > 3 {
		return v, fmt.Errorf("mlcore: macOS version %q: want major[.minor[.patch]]", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, fmt.Errorf("mlcore: macOS version %q: %q is not a number", s, p)
		}
		v[i] = n
	}
	return v, nil
}

func (v osVersion) String() string {
	if v[2] == 0 {
		return fmt.Sprintf("%d.%d", v[0], v[1])
	}
	return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2])
}

func (v osVersion) atLeast(w osVersion) bool {
	for i := range v {
		if v[i] != w[i] {
			return v[i] > w[i]
		}
	}
	return true
}

// OSVersionError says that a feature needs a newer macOS than this one.
type OSVersionError struct {
	What string // the feature, e.g. "functionName (multifunction packages)"
	Need string // the first macOS that has it
	Have string // the running macOS
}

// Error says which macOS the feature needs and which one runs.
func (e *OSVersionError) Error() string {
	return fmt.Sprintf("coreml: %s needs macOS %s; this Mac runs macOS %s", e.What, e.Need, e.Have)
}

// requireMethod returns an *OSVersionError when the table says s came after
// have. what names the feature for the message ("" = the selector).
func requireMethod(have osVersion, s sel, what string) error {
	m := methods[s]
	if m.Since == "" {
		return nil
	}
	return requireSince(have, m.Since, cond(what != "", what, m.Class+" "+m.Name))
}

func requireSince(have osVersion, since, what string) error {
	need, err := parseOSVersion(since)
	if err != nil {
		return err
	}
	if !have.atLeast(need) {
		return &OSVersionError{What: what, Need: need.String(), Have: have.String()}
	}
	return nil
}

func cond[T any](c bool, a, b T) T {
	if c {
		return a
	}
	return b
}
