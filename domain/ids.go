package domain

import "regexp"

var (
	idPattern        = regexp.MustCompile(`^[A-Za-z0-9_-]{1,96}$`)
	requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)
	kindPattern      = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)
)

// ValidID reports whether s is a public ID: [A-Za-z0-9_-]{1,96} (RFC §4.1).
func ValidID(s string) bool { return idPattern.MatchString(s) }

// ValidRequestID reports whether s is a request_id: [A-Za-z0-9_.:-]{1,128}.
func ValidRequestID(s string) bool { return requestIDPattern.MatchString(s) }

func checkID(field, s string) error {
	if !ValidID(s) {
		return Errorf(CodeInvalidRequest, "%s must match [A-Za-z0-9_-]{1,96}", field).WithDetails("field", field)
	}
	return nil
}

func checkRequestID(s string) error {
	if !ValidRequestID(s) {
		return Errorf(CodeInvalidRequest, "request_id must match [A-Za-z0-9_.:-]{1,128}").WithDetails("field", "request_id")
	}
	return nil
}

// checkPageLimit: below 1 is a malformed request; above the published maximum is a limit (SUPPLEMENT §5.3).
func checkPageLimit(limit, max int) error {
	if limit < 1 {
		return Errorf(CodeInvalidRequest, "limit must be at least 1").WithDetails("field", "limit")
	}
	if limit > max {
		return Errorf(CodeResourceLimit, "limit is above the published maximum %d", max).WithDetails("field", "limit", "limit", max)
	}
	return nil
}
