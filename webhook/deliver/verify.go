package deliver

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/waypost/waypost/webhook/dial"
	"github.com/waypost/waypost/webhook/sign"
)

// Verification challenge limits (RFC §12.4).
const (
	// ChallengeTTL is how long a challenge is valid.
	ChallengeTTL = 60 * time.Second
	// VerifyTimeout is how long the receiver has to answer.
	VerifyTimeout = 10 * time.Second
	// ChallengeType is the "type" member of a challenge body.
	ChallengeType = "verification"
)

// Failure says why a verification failed.
type Failure int

// The failures. FailForbiddenTarget maps to FORBIDDEN_TARGET, every other one to
// WEBHOOK_VERIFICATION_FAILED.
const (
	// FailForbiddenTarget: the address rules refuse the target (see package dial).
	FailForbiddenTarget Failure = iota + 1
	// FailTimeout: no complete answer within VerifyTimeout, or the challenge expired.
	FailTimeout
	// FailStatus: the receiver answered with a non-2xx status (StatusCode says which).
	FailStatus
	// FailEcho: the answer did not echo the challenge.
	FailEcho
	// FailUnreachable: the connection failed (refused, reset, TLS, DNS).
	FailUnreachable
)

func (f Failure) String() string {
	switch f {
	case FailForbiddenTarget:
		return "forbidden target"
	case FailTimeout:
		return "timeout"
	case FailStatus:
		return "non-2xx status"
	case FailEcho:
		return "wrong echo"
	case FailUnreachable:
		return "unreachable"
	default:
		return fmt.Sprintf("Failure(%d)", int(f))
	}
}

// VerifyError is a failed verification.
type VerifyError struct {
	Failure Failure
	// StatusCode is the receiver's status for FailStatus and FailEcho, else 0.
	StatusCode int
	// Err is the underlying error, if any (a *dial.TargetError for FailForbiddenTarget).
	Err error
}

func (e *VerifyError) Error() string {
	msg := "webhook verification failed: " + e.Failure.String()
	if e.StatusCode != 0 {
		msg += fmt.Sprintf(" (status %d)", e.StatusCode)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *VerifyError) Unwrap() error { return e.Err }

// Verifier runs verification challenges. The zero value is ready for production use.
type Verifier struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Rand is the source of challenges and webhook-ids; nil means crypto/rand.
	Rand io.Reader
	// Timeout may shorten VerifyTimeout (tests); 0 or more than VerifyTimeout means VerifyTimeout.
	Timeout time.Duration
}

// Verify runs a verification challenge with the zero Verifier.
func Verify(ctx context.Context, client Poster, target string, secret sign.Secret) error {
	return Verifier{}.Verify(ctx, client, target, secret)
}

// Verify sends {"type":"verification","challenge":"<32 random bytes, base64url>"} to target, signed with
// secret under a fresh webhook-id, and requires a 2xx answer within VerifyTimeout whose JSON body has
// "challenge" equal to the one sent. Each call uses a new challenge, accepted once, and only within
// ChallengeTTL of being issued. Failures are *VerifyError; an error of another type means the check
// could not run (no secret, no client, ctx canceled).
func (v Verifier) Verify(ctx context.Context, client Poster, target string, secret sign.Secret) error {
	if client == nil || secret.IsZero() {
		return errors.New("deliver: Verify needs a client and a secret")
	}
	now, rnd := v.Now, v.Rand
	if now == nil {
		now = time.Now
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	timeout := VerifyTimeout
	if v.Timeout > 0 && v.Timeout < timeout {
		timeout = v.Timeout
	}
	var buf [32 + 16]byte
	if _, err := io.ReadFull(rnd, buf[:]); err != nil {
		return fmt.Errorf("deliver: generating challenge: %w", err)
	}
	challenge := base64.RawURLEncoding.EncodeToString(buf[:32])
	id := "wv_" + hex.EncodeToString(buf[32:])
	body, err := json.Marshal(challengeBody{Type: ChallengeType, Challenge: challenge})
	if err != nil {
		return fmt.Errorf("deliver: encoding challenge: %w", err)
	}
	signer, err := sign.NewSigner(sign.Keys{Current: secret}, sign.WithClock(now))
	if err != nil {
		return fmt.Errorf("deliver: %w", err)
	}
	sh, err := signer.Sign(id, body)
	if err != nil {
		return fmt.Errorf("deliver: signing challenge: %w", err)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	sh.Set(h)
	issued := now()

	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := client.Post(cctx, target, h, body)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("deliver: verification of %s cut short: %w", id, cerr)
		}
		if te, ok := errors.AsType[*dial.TargetError](err); ok {
			return &VerifyError{Failure: FailForbiddenTarget, Err: te}
		}
		if dial.IsTimeout(err) {
			return &VerifyError{Failure: FailTimeout, Err: err}
		}
		return &VerifyError{Failure: FailUnreachable, Err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &VerifyError{Failure: FailStatus, StatusCode: resp.StatusCode}
	}
	if age := now().Sub(issued); age > ChallengeTTL {
		return &VerifyError{Failure: FailTimeout, Err: fmt.Errorf("answer arrived %v after the challenge was issued", age)}
	}
	var echo struct {
		Challenge *string `json:"challenge"`
	}
	if resp.Truncated {
		return &VerifyError{Failure: FailEcho, StatusCode: resp.StatusCode, Err: errors.New("answer too large")}
	}
	if err := json.Unmarshal(resp.Body, &echo); err != nil {
		return &VerifyError{Failure: FailEcho, StatusCode: resp.StatusCode, Err: fmt.Errorf("answer is not a JSON object: %w", err)}
	}
	if echo.Challenge == nil || subtle.ConstantTimeCompare([]byte(*echo.Challenge), []byte(challenge)) != 1 {
		return &VerifyError{Failure: FailEcho, StatusCode: resp.StatusCode, Err: errors.New("answer does not echo the challenge")}
	}
	return nil
}

type challengeBody struct {
	Type      string `json:"type"`
	Challenge string `json:"challenge"`
}
