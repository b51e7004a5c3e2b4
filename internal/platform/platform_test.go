package platform

import (
	"regexp"
	"testing"
)

// TestIDsSortByTheSecond: IDs of a later second sort after those of an earlier one, whatever their random
// part; IDs of one second differ; every ID has the public shape.
func TestIDsSortByTheSecond(t *testing.T) {
	shape := regexp.MustCompile(`^msg_[0-9a-hjkmnp-tv-z]{20}$`)
	var ids []string
	for _, sec := range []int64{1_700_000_000, 1_700_000_001, 1_800_000_000, 34_000_000_000} {
		for _, fill := range []byte{0xff, 0x00, 0x7f} {
			var b [9]byte
			for i := range b {
				b[i] = fill
			}
			ids = append(ids, withPrefix("msg", idAt(sec, b)))
		}
	}
	for i := 3; i < len(ids); i += 3 {
		for _, later := range ids[i : i+3] {
			for _, earlier := range ids[i-3 : i] {
				if later <= earlier {
					t.Errorf("%s (a later second) sorts before %s", later, earlier)
				}
			}
		}
	}
	for _, id := range ids {
		if !shape.MatchString(id) {
			t.Errorf("%q does not have the public shape", id)
		}
	}
	seen := map[string]bool{}
	for range 1000 {
		id := IDs{}.NewID("msg")
		if seen[id] || !shape.MatchString(id) {
			t.Fatalf("NewID gave %q twice or misshaped", id)
		}
		seen[id] = true
	}
}
