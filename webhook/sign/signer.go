package sign

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The Standard Webhooks request headers.
const (
	HeaderID        = standardwebhooks.HeaderWebhookID
	HeaderTimestamp = standardwebhooks.HeaderWebhookTimestamp
	HeaderSignature = standardwebhooks.HeaderWebhookSignature
)

// MaxDualWindow is the longest time after a rotation during which requests carry a signature by the
// previous secret as well as by the current one (RFC §12.4).
const MaxDualWindow = 5 * time.Minute

// Keys is a subscription's signing material: the current secret and, after a rotation, the previous one.
type Keys struct {
	// Current signs every request.
	Current Secret
	// Previous also signs requests until RotatedAt+window; zero when there was no rotation.
	Previous Secret
	// RotatedAt is when Current replaced Previous.
	RotatedAt time.Time
}

// Rotate returns the keys after replacing the current secret with next at time at: the old current secret
// becomes Previous and keeps signing for the dual-signature window.
func (k Keys) Rotate(next Secret, at time.Time) Keys {
	return Keys{Current: next, Previous: k.Current, RotatedAt: at}
}

// Active returns the secrets that sign a request at time now, current first. The previous secret is
// included while now is before RotatedAt+window; window is capped at MaxDualWindow.
func (k Keys) Active(now time.Time, window time.Duration) []Secret {
	out := []Secret{k.Current}
	window = min(window, MaxDualWindow)
	if !k.Previous.IsZero() && !k.Previous.Equal(k.Current) && now.Before(k.RotatedAt.Add(window)) {
		out = append(out, k.Previous)
	}
	return out
}

// Headers are the signature headers of one request.
type Headers struct {
	// ID is the webhook-id: the event ID, or a fresh ID for a verification challenge.
	ID string
	// Timestamp is the signing time (whole seconds).
	Timestamp time.Time
	// Signature is one or more space-separated "v1,<base64>" signatures.
	Signature string
}

// Set writes the three headers into h.
func (s Headers) Set(h http.Header) {
	h.Set(HeaderID, s.ID)
	h.Set(HeaderTimestamp, strconv.FormatInt(s.Timestamp.Unix(), 10))
	h.Set(HeaderSignature, s.Signature)
}

// Signer signs requests with a subscription's keys. It is safe for concurrent use.
type Signer struct {
	keys   Keys
	window time.Duration
	now    func() time.Time
}

// SignerOption configures a Signer.
type SignerOption func(*Signer)

// WithClock makes the signer read the time from now (tests use a fake clock).
func WithClock(now func() time.Time) SignerOption { return func(s *Signer) { s.now = now } }

// WithDualWindow shortens the dual-signature window; values above MaxDualWindow are capped.
func WithDualWindow(d time.Duration) SignerOption { return func(s *Signer) { s.window = max(0, d) } }

// NewSigner returns a signer for keys. Keys.Current must be set.
func NewSigner(keys Keys, opts ...SignerOption) (*Signer, error) {
	if keys.Current.IsZero() {
		return nil, errors.New("sign: no current secret")
	}
	s := &Signer{keys: keys, window: MaxDualWindow, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	s.window = min(s.window, MaxDualWindow)
	return s, nil
}

// Sign signs body, exactly the bytes that will be sent, under webhook-id id at the signer's current time.
// The id must be non-empty printable ASCII without '.', spaces or commas, so the signed content
// "id.timestamp.body" cannot be split another way.
func (s *Signer) Sign(id string, body []byte) (Headers, error) {
	if err := checkMessageID(id); err != nil {
		return Headers{}, err
	}
	now := s.now()
	ts := time.Unix(now.Unix(), 0).UTC()
	sigs := make([]string, 0, 2)
	// The window is judged on the precise time: the truncated timestamp would stretch it by up to a second.
	for _, sec := range s.keys.Active(now, s.window) {
		wh, err := standardwebhooks.NewWebhookRaw(sec.key[:])
		if err != nil {
			return Headers{}, fmt.Errorf("sign: %w", err)
		}
		sig, err := wh.Sign(id, ts, body)
		if err != nil {
			return Headers{}, fmt.Errorf("sign: signing %s: %w", id, err)
		}
		sigs = append(sigs, sig)
	}
	return Headers{ID: id, Timestamp: ts, Signature: strings.Join(sigs, " ")}, nil
}

func checkMessageID(id string) error {
	if id == "" || len(id) > 256 {
		return fmt.Errorf("sign: webhook-id must be 1..256 bytes, got %d", len(id))
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f || c == '.' || c == ',' {
			return fmt.Errorf("sign: webhook-id %q has a forbidden byte at %d", id, i)
		}
	}
	return nil
}
