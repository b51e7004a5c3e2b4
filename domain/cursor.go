package domain

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
)

// cursorProtocol names the cursor format; cursors of another protocol are INVALID_CURSOR.
const cursorProtocol = "wpc1"

// cursorBody is what an inbox cursor binds (RFC §8.2): protocol, space, actor, consumer, view revision,
// filter fingerprint, grant fingerprint and position.
type cursorBody struct {
	Proto    string `json:"p"`
	Space    string `json:"s"`
	Actor    string `json:"a"`
	Consumer string `json:"c"`
	ViewRev  int64  `json:"r"`
	FilterFP string `json:"f"`
	GrantFP  string `json:"g"`
	Pos      uint64 `json:"n"`
}

type cursorCodec struct{ key []byte }

func (c cursorCodec) mac(payload string) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// seal signs a cursor body: base64url(JSON body) "." base64url(HMAC-SHA256 of that).
func (c cursorCodec) seal(body any) string {
	payload := base64.RawURLEncoding.EncodeToString(encode(body))
	return payload + "." + c.mac(payload)
}

// open verifies a sealed cursor's integrity and decodes its body into body; it reports whether both worked.
func (c cursorCodec) open(s string, body any) bool {
	payload, sig, ok := strings.Cut(s, ".")
	if !ok || len(s) > 2048 || !hmac.Equal([]byte(sig), []byte(c.mac(payload))) {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	return err == nil && json.Unmarshal(raw, body) == nil
}

func (c cursorCodec) encode(b cursorBody) string {
	b.Proto = cursorProtocol
	return c.seal(b)
}

var errInvalidCursor = Errorf(CodeInvalidCursor, "the cursor is not a valid cursor of this service")

// decode verifies integrity and protocol; scope checks are the caller's.
func (c cursorCodec) decode(s string) (cursorBody, error) {
	var b cursorBody
	if !c.open(s, &b) || b.Proto != cursorProtocol {
		return b, errInvalidCursor
	}
	return b, nil
}

// wellFormed reports whether s could be a cursor of this service at all (ASCII, bounded): anything else is
// INVALID_CURSOR without further checks.
func (c cursorCodec) wellFormed(s string) bool {
	if len(s) > 2048 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// checkScope compares a verified cursor with the scope it is used in.
func (b cursorBody) checkScope(want cursorBody) error {
	if b.Space != want.Space || b.Actor != want.Actor || b.Consumer != want.Consumer || b.ViewRev != want.ViewRev ||
		b.FilterFP != want.FilterFP || b.GrantFP != want.GrantFP {
		return Errorf(CodeCursorScopeChanged, "the cursor belongs to another consumer, view revision or set of rights; resynchronize from a null cursor")
	}
	return nil
}
