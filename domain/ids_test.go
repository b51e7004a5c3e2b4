package domain

import (
	"regexp"
	"testing"

	"pgregory.net/rapid"
)

// TestIDSyntaxMatchesPatterns holds the byte-by-byte matchers to the patterns they document: strings of
// the pattern's own alphabet at and around the length limits, the same with one character replaced by a
// neighbour in ASCII (or a non-ASCII rune), and arbitrary strings.
func TestIDSyntaxMatchesPatterns(t *testing.T) {
	for _, tc := range []struct {
		pattern, alphabet string
		match             func(string) bool
	}{
		{`^[A-Za-z0-9_-]{1,96}$`, "azAZ09_-bY5", ValidID},
		{`^[A-Za-z0-9_.:-]{1,128}$`, "azAZ09_.:-", ValidRequestID},
		{`^[a-z][a-z0-9_.-]{0,63}$`, "az09_.-q", validKind},
	} {
		re := regexp.MustCompile(tc.pattern)
		t.Run(tc.pattern, func(t *testing.T) {
			// Every length around the limits, with each character of the alphabet in every position class.
			for n := 0; n <= 130; n++ {
				for off := range len(tc.alphabet) {
					b := make([]byte, n)
					for i := range b {
						b[i] = tc.alphabet[(i+off)%len(tc.alphabet)]
					}
					if got, want := tc.match(string(b)), re.MatchString(string(b)); got != want {
						t.Fatalf("%q (%d bytes): %v, pattern says %v", b, n, got, want)
					}
				}
			}
			valid := rapid.SampledFrom([]byte(tc.alphabet))
			rapid.Check(t, func(t *rapid.T) {
				var s string
				switch rapid.IntRange(0, 2).Draw(t, "shape") {
				case 0:
					s = rapid.StringN(0, 130, -1).Draw(t, "arbitrary")
				default:
					n := rapid.SampledFrom([]int{0, 1, 2, 63, 64, 65, 95, 96, 97, 127, 128, 129}).Draw(t, "len")
					b := rapid.SliceOfN(valid, n, n).Draw(t, "bytes")
					s = string(b)
					if n > 0 && rapid.Bool().Draw(t, "replace one") {
						i := rapid.IntRange(0, n-1).Draw(t, "at")
						r := rapid.SampledFrom([]string{"/", "@", "`", "[", "{", ":", ".", "A", "0", "\x00", " ", "é", "\x7f"}).Draw(t, "by")
						s = s[:i] + r + s[i+1:]
					}
				}
				if got, want := tc.match(s), re.MatchString(s); got != want {
					t.Fatalf("%q (%d bytes): %v, pattern says %v", s, len(s), got, want)
				}
			})
		})
	}
}
