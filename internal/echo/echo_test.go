package echo_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/waypost/waypost/internal/echo"
)

func TestClip(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"short", "short"},
		{strings.Repeat("a", 100), strings.Repeat("a", 100)},
		{strings.Repeat("a", 101), strings.Repeat("a", 100) + "…"},
		{strings.Repeat("a", 99) + "é", strings.Repeat("a", 99) + "…"}, // é is 2 bytes: cut before it
	} {
		got := echo.Clip(c.in)
		if got != c.want {
			t.Errorf("Clip(%d bytes) = %q, want %q", len(c.in), got, c.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Clip(%q) is not valid UTF-8", c.in)
		}
	}
}
