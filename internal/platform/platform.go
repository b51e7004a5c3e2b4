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

// idAlphabet is the IDs' base32 alphabet, in ascending byte order (so that IDs sort by their time part).
const idAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"

var idEncoding = base32.NewEncoding(idAlphabet).WithPadding(base32.NoPadding)

// NewID returns prefix + "_" + 20 base32 characters: 7 of the current Unix second, then 13 of 65 random
// bits. IDs made in a later second sort after those made earlier, so that records keyed by an ID (a message,
// its thread) are written near the end of their key range: the embedded store's compactions then rewrite
// the tail of that range rather than all of it (docs/decisions.md, "Time-ordered IDs"). IDs stay opaque to
// clients; they are never secrets (tokens and signatures carry their own random bits).
func (IDs) NewID(prefix string) string {
	var b [9]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("platform: reading random bytes: %v", err)) // crypto/rand never fails on supported OSes
	}
	return withPrefix(prefix, idAt(time.Now().Unix(), b))
}

// idAt is NewID's 20 characters for Unix second sec and random bytes b.
func idAt(sec int64, b [9]byte) string {
	var out [20]byte
	for i := 6; i >= 0; i-- {
		out[i] = idAlphabet[sec&31]
		sec >>= 5
	}
	copy(out[7:], idEncoding.EncodeToString(b[:])[:13])
	return string(out[:])
}

func withPrefix(prefix, id string) string {
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
