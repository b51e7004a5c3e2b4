// Package platform holds the production implementations of the domain's clock and ID ports.
package platform

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"strings"
	"time"
)

// Clock is the system clock.
type Clock struct{}

// Now returns the current time.
func (Clock) Now() time.Time { return time.Now() }

// IDs makes random IDs from the operating system's CSPRNG.
type IDs struct{}

var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewID returns prefix + "_" + 20 base32 characters of 100 random bits.
func (IDs) NewID(prefix string) string {
	var b [13]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("platform: reading random bytes: %v", err)) // crypto/rand never fails on supported OSes
	}
	id := idEncoding.EncodeToString(b[:])[:20]
	if prefix == "" {
		return id
	}
	return strings.TrimSuffix(prefix, "_") + "_" + id
}

// Random fills b with random bytes.
func (IDs) Random(b []byte) error {
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("platform: reading random bytes: %w", err)
	}
	return nil
}
