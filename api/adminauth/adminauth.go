// Package adminauth holds the instance administrator's secret (WAYPOST_ADMIN_SECRET, RFC §4.4: "at least
// 32 random bytes"): the strength check every deployment runs before it starts, and the constant-time
// comparison of a presented Bearer token with it.
package adminauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"math"
	"strings"
)

// MinEntropyBits is the least estimated entropy an admin secret must carry: 32 random bytes.
const MinEntropyBits = 256

// minSpreadBitsPerChar is the least Shannon entropy of the secret's own character distribution, per
// character. Random text over any alphabet Check accepts has 3.5 and more (64 hex digits: about 3.8); a
// long run of a few repeated characters has 2 or less.
const minSpreadBitsPerChar = 3

// GenerateHint tells an operator how to make a secret that passes Check.
const GenerateHint = "generate one with `openssl rand -base64 32` or `head -c 32 /dev/urandom | base64`"

// ErrWeakSecret reports an admin secret with less than MinEntropyBits of estimated entropy.
var ErrWeakSecret = errors.New("the admin secret is too weak")

// EstimateBits estimates the entropy of a secret in bits. It cannot know how the secret was made; it
// measures what the text could at most carry: its length (without base64 '=' padding) times the bits per
// character of the smallest usual alphabet that holds every character (hex 4, base32 5, lowercase
// alphanumeric 5.17, alphanumeric 5.95, base64/base64url 6, printable ASCII 6.57, anything else 8 per byte).
// The generated secrets of `waypost serve` (wpa_ + base64url of 32 bytes) and of the AWS stack (48
// alphanumeric characters) carry 282 and 285.
func EstimateBits(secret string) float64 {
	s := strings.TrimRight(secret, "=")
	if s == "" {
		return 0
	}
	var hexLower, hexUpper, b32, lowerAlnum, alnum, b64, ascii = true, true, true, true, true, true, true
	for i := 0; i < len(s); i++ {
		c := s[i]
		digit, lower, upper := '0' <= c && c <= '9', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z'
		hexLower = hexLower && (digit || 'a' <= c && c <= 'f')
		hexUpper = hexUpper && (digit || 'A' <= c && c <= 'F')
		b32 = b32 && (upper || '2' <= c && c <= '7')
		lowerAlnum = lowerAlnum && (digit || lower)
		alnum = alnum && (digit || lower || upper)
		b64 = b64 && (digit || lower || upper || c == '-' || c == '_' || c == '+' || c == '/')
		ascii = ascii && 0x21 <= c && c <= 0x7e
	}
	var alphabet float64
	switch {
	case hexLower || hexUpper:
		alphabet = 16
	case b32:
		alphabet = 32
	case lowerAlnum:
		alphabet = 36
	case alnum:
		alphabet = 62
	case b64:
		alphabet = 64
	case ascii:
		alphabet = 94
	default:
		alphabet = 256
	}
	return float64(len(s)) * math.Log2(alphabet)
}

// spreadBits is the Shannon entropy of the secret's byte distribution, per byte.
func spreadBits(s string) float64 {
	if s == "" {
		return 0
	}
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	var h float64
	for _, n := range counts {
		if n > 0 {
			p := float64(n) / float64(len(s))
			h -= p * math.Log2(p)
		}
	}
	return h
}

// Check accepts a secret that can carry at least MinEntropyBits (see EstimateBits) and is not a long run
// of a few repeated characters. The error wraps ErrWeakSecret and says how to generate a good one.
func Check(secret string) error {
	if secret != strings.TrimSpace(secret) {
		return fmt.Errorf("%w: it starts or ends with white space; %s", ErrWeakSecret, GenerateHint)
	}
	bits := EstimateBits(secret)
	if bits < MinEntropyBits {
		return fmt.Errorf("%w: %d characters carry at most about %.0f bits, at least %d (32 random bytes) are required; %s",
			ErrWeakSecret, len(secret), bits, MinEntropyBits, GenerateHint)
	}
	if spreadBits(secret) < minSpreadBitsPerChar {
		return fmt.Errorf("%w: it repeats a few characters (%.1f bits per character), it cannot be random; %s",
			ErrWeakSecret, spreadBits(secret), GenerateHint)
	}
	return nil
}

// Verifier compares presented tokens with the admin secret in constant time: both sides are hashed to
// SHA-256 digests of equal length first, so neither the comparison nor its length check returns early on
// the first differing byte or on a length difference.
type Verifier struct {
	digest [sha256.Size]byte
}

// NewVerifier checks the secret (Check) and returns its verifier.
func NewVerifier(secret string) (*Verifier, error) {
	if err := Check(secret); err != nil {
		return nil, err
	}
	return &Verifier{digest: sha256.Sum256([]byte(secret))}, nil
}

// Matches reports whether token is the admin secret.
func (v *Verifier) Matches(token string) bool {
	d := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(d[:], v.digest[:]) == 1
}
