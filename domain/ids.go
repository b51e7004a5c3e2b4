package domain

import "strings"

// The identifier syntaxes are matched byte by byte: they run several times per request, and a regular
// expression costs ten times as much (TestIDSyntaxMatchesPatterns holds them to the patterns in their docs).

// ValidID reports whether s is a public ID: [A-Za-z0-9_-]{1,96} (RFC §4.1).
func ValidID(s string) bool { return allOf(s, 1, 96, "_-") }

// ValidRequestID reports whether s is a request_id: [A-Za-z0-9_.:-]{1,128}.
func ValidRequestID(s string) bool { return allOf(s, 1, 128, "_.:-") }

// validKind reports whether s is a message kind: [a-z][a-z0-9_.-]{0,63}.
func validKind(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// allOf reports whether s has min to max bytes, each an ASCII letter, a digit or one of extra.
func allOf(s string, min, max int, extra string) bool {
	if len(s) < min || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') && strings.IndexByte(extra, c) < 0 {
			return false
		}
	}
	return true
}

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
