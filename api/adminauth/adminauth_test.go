package adminauth_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/waypost/waypost/api/adminauth"
)

func random(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// TestCheck: secrets made the documented ways pass; short, low-alphabet and repetitive ones are refused
// with a message that says how to generate a good one.
func TestCheck(t *testing.T) {
	for i := 0; i < 200; i++ { // random secrets must never be refused by the spread check
		for _, good := range []string{
			base64.StdEncoding.EncodeToString(random(32)),             // openssl rand -base64 32
			hex.EncodeToString(random(32)),                            // openssl rand -hex 32
			"wpa_" + base64.RawURLEncoding.EncodeToString(random(32)), // waypost serve's generated secret
			strings.ToUpper(hex.EncodeToString(random(32))),
		} {
			if err := adminauth.Check(good); err != nil {
				t.Fatalf("Check(%q) = %v", good, err)
			}
		}
	}
	alnum := "aB3dE5gH7jK9mN1pQ2sT4vW6yZ8bC0eF1hJ3kL5nP7rS9uX2wY4zA6cD8fG0iM2o" // 64 alphanumeric: the AWS stack's 48 and more
	for _, good := range []string{alnum[:48], alnum} {
		if err := adminauth.Check(good); err != nil {
			t.Errorf("Check(%q) = %v", good, err)
		}
	}
	for _, weak := range []string{
		"", "short", "changeme", "test-admin-secret-0123456789abcdef", // 34 base64url characters: 204 bits
		hex.EncodeToString(random(31)),                      // 248 bits
		base64.RawStdEncoding.EncodeToString(random(31)),    // 42 characters: 252 bits
		strings.Repeat("a", 200),                            // long but one character
		strings.Repeat("ab", 100),                           // two characters
		" " + base64.StdEncoding.EncodeToString(random(32)), // stray white space
		base64.StdEncoding.EncodeToString(random(32)) + "\n",
	} {
		err := adminauth.Check(weak)
		if !errors.Is(err, adminauth.ErrWeakSecret) {
			t.Errorf("Check(%q) = %v, want ErrWeakSecret", weak, err)
			continue
		}
		if !strings.Contains(err.Error(), "openssl rand -base64 32") {
			t.Errorf("Check(%q): the message does not say how to generate a secret: %v", weak, err)
		}
	}
}

// TestVerifier: only the exact secret matches; prefixes, extensions and other lengths do not.
func TestVerifier(t *testing.T) {
	secret := "wpa_" + base64.RawURLEncoding.EncodeToString(random(32))
	v, err := adminauth.NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Matches(secret) {
		t.Fatal("the secret does not match itself")
	}
	for _, wrong := range []string{"", secret[:len(secret)-1], secret + "x", strings.ToUpper(secret), "Bearer " + secret} {
		if v.Matches(wrong) {
			t.Errorf("Matches(%q) = true", wrong)
		}
	}
	if _, err := adminauth.NewVerifier("short"); !errors.Is(err, adminauth.ErrWeakSecret) {
		t.Fatalf("NewVerifier(short) = %v", err)
	}
}
