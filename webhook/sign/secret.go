// Package sign signs webhook requests with the Standard Webhooks scheme (RFC §12.4): HMAC-SHA256 over
// "webhook-id.webhook-timestamp.body" with a 32-byte secret written "whsec_" + standard base64.
//
// A Secret never prints itself: String, GoString, Format and LogValue all redact, and JSON encoding is
// refused, so a secret cannot reach a log line or an event body by accident. Reveal is the one explicit way
// to get the encoded form, for storage.
package sign

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// SecretPrefix starts the text form of a secret.
const SecretPrefix = "whsec_"

// SecretBytes is the length of a secret's key (RFC §12.3).
const SecretBytes = 32

const redacted = SecretPrefix + "[REDACTED]"

// Secret is a webhook signing secret. The zero value is "no secret".
type Secret struct {
	key [SecretBytes]byte
	set bool
}

// NewSecret returns a fresh secret of 32 bytes from crypto/rand.
func NewSecret() Secret {
	var s Secret
	_, _ = rand.Read(s.key[:]) // crypto/rand.Read never returns an error (it aborts the program instead)
	s.set = true
	return s
}

// ParseSecret parses "whsec_" followed by the standard (padded) base64 of exactly 32 bytes. The error
// never contains the input.
func ParseSecret(text string) (Secret, error) {
	rest, ok := strings.CutPrefix(text, SecretPrefix)
	if !ok {
		return Secret{}, errors.New("sign: secret must start with " + SecretPrefix)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(rest)
	if err != nil || strings.ContainsAny(rest, "\r\n") { // the decoder skips CR and LF
		return Secret{}, errors.New("sign: secret is not standard base64 after " + SecretPrefix)
	}
	if len(raw) != SecretBytes {
		return Secret{}, fmt.Errorf("sign: secret decodes to %d bytes, want %d", len(raw), SecretBytes)
	}
	var s Secret
	copy(s.key[:], raw)
	clear(raw)
	s.set = true
	return s, nil
}

// IsZero reports whether s holds no secret.
func (s Secret) IsZero() bool { return !s.set }

// Equal reports in constant time whether s and o hold the same key.
func (s Secret) Equal(o Secret) bool {
	return s.set == o.set && subtle.ConstantTimeCompare(s.key[:], o.key[:]) == 1
}

// Reveal returns the "whsec_…" text form. Use it only to store the secret or hand it to its owner.
func (s Secret) Reveal() string {
	if !s.set {
		return ""
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(s.key[:])
}

// String redacts the secret.
func (s Secret) String() string { return redacted }

// GoString redacts the secret (%#v).
func (s Secret) GoString() string { return "sign.Secret(" + redacted + ")" }

// Format redacts the secret for every fmt verb, including those (%d, %x) that would otherwise print the
// key bytes through reflection.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, s.GoString())
		return
	}
	_, _ = io.WriteString(f, redacted)
}

// LogValue redacts the secret in log/slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON refuses to encode a secret: store Reveal() explicitly where a secret must be kept.
func (s Secret) MarshalJSON() ([]byte, error) {
	return nil, errors.New("sign: refusing to JSON-encode a secret (use Reveal to store it)")
}

// MarshalText refuses to encode a secret, for the same reason as MarshalJSON.
func (s Secret) MarshalText() ([]byte, error) {
	return nil, errors.New("sign: refusing to text-encode a secret (use Reveal to store it)")
}
