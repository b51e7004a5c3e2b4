package livefeed

import (
	"encoding/json"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/waypost/waypost/domain/port"
)

// TestEncodeAsMarshal: Encode writes what encoding/json's Marshal writes for the announcement, and Decode
// reads it back, whatever the item ID holds.
func TestEncodeAsMarshal(t *testing.T) {
	for _, id := range []string{"it_0001", "", `a"b\c`, "<&>", "é\u2028\x01", "\xff"} {
		for _, seq := range []uint64{0, 1, 1<<64 - 1} {
			p := port.Published{SpaceID: "sp_1", VisibleSeq: seq, ItemID: id}
			want, err := json.Marshal(announcement{VisibleSeq: strconv.FormatUint(seq, 10), ItemID: id})
			if err != nil {
				t.Fatal(err)
			}
			got := Encode(p)
			if got != string(want) {
				t.Fatalf("Encode(%q, %d) = %s, want %s", id, seq, got, want)
			}
			back, err := Decode("sp_1", got)
			if err != nil || back.VisibleSeq != seq || (utf8.ValidString(id) && back != p) {
				t.Fatalf("Decode(%s) = %+v, %v", got, back, err)
			}
		}
	}
}
