package port_test

import (
	"fmt"
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/waypost/waypost/domain/port"
)

// TestSlotSK: a slot's sort key is its value in 20 decimal digits, and ParseSlotSK accepts exactly those
// keys.
func TestSlotSK(t *testing.T) {
	for _, v := range []uint64{0, 1, 9, 10, 12345678901234567890, math.MaxUint64} {
		if got, want := port.SlotSK(v), fmt.Sprintf("%020d", v); got != want {
			t.Fatalf("SlotSK(%d) = %q, want %q", v, got, want)
		}
	}
	for _, sk := range []string{"", "1", "0000000000000000000a", "99999999999999999999", "18446744073709551616", "-0000000000000000001", " 0000000000000000001"} {
		if v, ok := port.ParseSlotSK(sk); ok {
			t.Fatalf("ParseSlotSK(%q) = %d, accepted", sk, v)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.Uint64().Draw(t, "v")
		sk := port.SlotSK(v)
		if want := fmt.Sprintf("%020d", v); sk != want {
			t.Fatalf("SlotSK(%d) = %q, want %q", v, sk, want)
		}
		if got, ok := port.ParseSlotSK(sk); !ok || got != v {
			t.Fatalf("ParseSlotSK(%q) = %d, %v", sk, got, ok)
		}
		s := rapid.StringMatching(`[0-9a ]{0,21}`).Draw(t, "s")
		got, ok := port.ParseSlotSK(s)
		if ok != (len(s) == 20 && fmt.Sprintf("%020d", got) == s) || (ok && port.SlotSK(got) != s) {
			t.Fatalf("ParseSlotSK(%q) = %d, %v", s, got, ok)
		}
	})
}
