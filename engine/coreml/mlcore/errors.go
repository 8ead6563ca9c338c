package mlcore

import (
	"errors"
	"fmt"
)

// NSError is a Core ML or Foundation call that failed, as the NSError it
// returned describes it.
type NSError struct {
	Op          string // the selector that failed, e.g. "predictionFromFeatures:options:error:"
	Subject     string // what it was called on: a model path, "function F of M", ...
	Domain      string // the NSError's domain ("" when the call gave no NSError)
	Code        int    // the NSError's code
	Description string // its localizedDescription
}

// Error returns "coreml: <selector> (<subject>): <description> [<domain> <code>]".
func (e *NSError) Error() string {
	s := "coreml: " + e.Op
	if e.Subject != "" {
		s += " (" + e.Subject + ")"
	}
	s += ": " + e.Description
	if e.Domain != "" {
		s += fmt.Sprintf(" [%s %d]", e.Domain, e.Code)
	}
	return s
}

// errorObject is what translating an NSError reads of it. The darwin code
// implements it over a real NSError; tests use a fake.
type errorObject interface {
	Domain() string
	Code() int
	LocalizedDescription() string
}

// callError turns a failed call into a Go error: the NSError's localized
// description, domain and code, or, when a call that should have set its
// NSError** returned nil without one, an error that says so.
func callError(op, subject string, e errorObject) error {
	if e == nil {
		return &NSError{Op: op, Subject: subject, Description: "failed without an NSError"}
	}
	desc := e.LocalizedDescription()
	if desc == "" {
		desc = "failed (no description)"
	}
	return &NSError{Op: op, Subject: subject, Domain: e.Domain(), Code: e.Code(), Description: desc}
}

// UnsupportedError is what New returns where Core ML cannot run. It
// matches errors.ErrUnsupported.
type UnsupportedError struct {
	GOOS, GOARCH string
}

// Error says what Core ML needs and what this machine is.
func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("Core ML needs macOS on Apple silicon (this is %s/%s); use the CPU backend", e.GOOS, e.GOARCH)
}

// Is makes errors.Is(err, errors.ErrUnsupported) true.
func (e *UnsupportedError) Is(target error) bool { return target == errors.ErrUnsupported }

// CVReturnError is a CoreVideo call that returned a CVReturn other than
// kCVReturnSuccess (the codes are in CVReturn.h: -6662 allocation failed,
// -6681 invalid size, -6682 invalid pixel buffer attributes, ...).
type CVReturnError struct {
	Op   string // the CoreVideo function
	Code int32
}

// Error returns "corevideo: <function> returned <code>".
func (e *CVReturnError) Error() string {
	return fmt.Sprintf("corevideo: %s returned %d", e.Op, e.Code)
}
