package domain

import (
	"fmt"

	"github.com/waypost/waypost/internal/codec/jcsfp"
)

// Fingerprint is the lowercase hex SHA-256 of the RFC 8785 (JCS) form of v's JSON (RFC §5.1). Numbers
// outside I-JSON (integers beyond 2^53-1, non-finite) are rejected.
func Fingerprint(v any) (string, error) {
	fp, err := jcsfp.Fingerprint(v)
	if err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	return fp, nil
}

// canonicalJSON returns the JCS form of raw JSON, rejecting numbers outside I-JSON.
func canonicalJSON(raw []byte) ([]byte, error) {
	out, err := jcsfp.Canonical(raw)
	if err != nil {
		return nil, fmt.Errorf("canonicalize: %w", err)
	}
	return out, nil
}
