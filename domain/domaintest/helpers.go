package domaintest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/waypost/waypost/domain"
)

// TB is the part of testing.TB and *rapid.T the helpers need, so that they work inside rapid properties
// (where failing the outer *testing.T would lose rapid's seed and shrinking).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// Client runs the service's operations on behalf of one test or one rapid check and fails it on
// unexpected errors. Request IDs come from the fixture, so they are unique across checks sharing it.
type Client struct {
	T   TB
	F   *Fixture
	Svc *domain.Service
	Ctx context.Context
}

// With returns a client of the fixture's service that reports to t.
func (f *Fixture) With(t TB) *Client {
	return &Client{T: t, F: f, Svc: f.Svc, Ctx: context.Background()}
}

// RID returns a fresh request ID.
func (c *Client) RID(prefix string) string { return c.F.RID(prefix) }

func mustDo[V any](t TB, what string) func(v V, err error) V {
	return func(v V, err error) V {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: unexpected error: %v", what, err)
		}
		return v
	}
}

// Space creates a space.
func (c *Client) Space() domain.SpaceResult {
	c.T.Helper()
	return mustDo[domain.SpaceResult](c.T, "CreateSpace")(c.Svc.CreateSpace(c.Ctx, domain.CreateSpaceRequest{RequestID: c.RID("sp")}))
}

// Actor creates an actor.
func (c *Client) Actor(space string) string {
	c.T.Helper()
	return mustDo[domain.ActorResult](c.T, "CreateActor")(c.Svc.CreateActor(c.Ctx, space, domain.CreateActorRequest{RequestID: c.RID("act")})).ActorID
}

// Consumer creates a consumer.
func (c *Client) Consumer(space, actor string, view domain.View, filter *domain.Filter) string {
	c.T.Helper()
	return mustDo[domain.ConsumerResult](c.T, "CreateConsumer")(c.Svc.CreateConsumer(c.Ctx, space, domain.CreateConsumerRequest{
		RequestID: c.RID("con"), ActorID: actor, View: view, Filter: filter})).ConsumerID
}

// Token creates a token (all scopes when none are given) and returns its secret and ID.
func (c *Client) Token(space, actor, consumer string, scopes ...domain.Scope) (secret, id string) {
	c.T.Helper()
	return c.TokenExpiring(space, actor, consumer, nil, scopes...)
}

// TokenExpiring creates a token that expires at expires (nil: never).
func (c *Client) TokenExpiring(space, actor, consumer string, expires *time.Time, scopes ...domain.Scope) (secret, id string) {
	c.T.Helper()
	if len(scopes) == 0 {
		scopes = domain.AllScopes()
	}
	r := mustDo[domain.TokenResult](c.T, "CreateToken")(c.Svc.CreateToken(c.Ctx, space, domain.CreateTokenRequest{
		RequestID: c.RID("tok"), ActorID: actor, ConsumerID: consumer, Scopes: scopes, ExpiresAt: expires}))
	return r.Token, r.TokenID
}

// Grant gives an actor a permission and returns the grant ID.
func (c *Client) Grant(space, actor string, perm domain.Permission, collection string) string {
	c.T.Helper()
	return mustDo[domain.GrantResult](c.T, "CreateGrant")(c.Svc.CreateGrant(c.Ctx, space, domain.CreateGrantRequest{
		RequestID: c.RID("grt"), ActorID: actor, Permission: perm, CollectionID: collection})).GrantID
}

// Principal authenticates a token, as the transport does before every operation.
func (c *Client) Principal(token string) *domain.Principal {
	c.T.Helper()
	return mustDo[*domain.Principal](c.T, "Authenticate")(c.Svc.Authenticate(c.Ctx, token))
}

// Party creates an actor with one inbox consumer and an all-scopes token.
func (c *Client) Party(space string) Party {
	c.T.Helper()
	a := c.Actor(space)
	con := c.Consumer(space, a, domain.ViewInbox, nil)
	tok, id := c.Token(space, a, "")
	return Party{ActorID: a, ConsumerID: con, Token: tok, TokenID: id, P: c.Principal(tok)}
}

// Send sends a text message to recipients and fails on error.
func (c *Client) Send(p *domain.Principal, text string, to ...string) domain.SendResult {
	c.T.Helper()
	return mustDo[domain.SendResult](c.T, "SendMessage")(c.Svc.SendMessage(c.Ctx, p, domain.SendRequest{
		RequestID: c.RID("send"), RecipientIDs: to, Subject: "s", Body: &domain.MessageBody{Text: text}}))
}

// PrepareText prepares a text/plain blob of text (blob.prepare) and fails on error.
func (c *Client) PrepareText(p *domain.Principal, text string) domain.BlobPrepareResult {
	c.T.Helper()
	sum := sha256.Sum256([]byte(text))
	return mustDo[domain.BlobPrepareResult](c.T, "PrepareBlob")(c.Svc.PrepareBlob(c.Ctx, p, domain.BlobPrepareRequest{
		RequestID: c.RID("bp"), ContentType: "text/plain", SizeBytes: int64(len(text)), SHA256: hex.EncodeToString(sum[:])}))
}

// TextBlob prepares a text/plain blob of text and, as asked, uploads and seals it (blob.commit); it returns
// the blob's ID and fails on error.
func (c *Client) TextBlob(p *domain.Principal, text string, upload, seal bool) string {
	c.T.Helper()
	prep := c.PrepareText(p, text)
	if upload {
		mustDo[domain.UploadResult](c.T, "Upload")(c.Svc.Upload(c.Ctx, p, prep.UploadID, "text/plain", int64(len(text)), strings.NewReader(text)))
	}
	if seal {
		mustDo[domain.BlobInfo](c.T, "CommitBlob")(c.Svc.CommitBlob(c.Ctx, p, domain.BlobCommitRequest{RequestID: c.RID("bc"), UploadID: prep.UploadID}))
	}
	return prep.BlobID
}

// Read reads one page and fails on error.
func (c *Client) Read(p *domain.Principal, consumer string, cursor *string, limit int) domain.Page {
	c.T.Helper()
	return mustDo[domain.Page](c.T, "ReadInbox")(c.Svc.ReadInbox(c.Ctx, p, domain.ReadRequest{ConsumerID: consumer, Cursor: cursor, Limit: limit}))
}

// ReadAll reads a consumer's feed from cursor to the end, page by page (at most 10000 pages), and returns the
// items and the last next_cursor.
func (c *Client) ReadAll(p *domain.Principal, consumer string, cursor *string, limit int) ([]domain.FeedItem, string) {
	c.T.Helper()
	var all []domain.FeedItem
	for range 10000 {
		page := c.Read(p, consumer, cursor, limit)
		all = append(all, page.Items...)
		next := page.NextCursor
		cursor = &next
		if !page.HasMore {
			return all, next
		}
	}
	c.T.Fatalf("ReadAll: has_more still true after 10000 pages")
	return nil, ""
}

// Feed returns every item of a space in visible_seq order, read through a fresh observer (an actor with a
// space.observe grant, an all-scopes token and a space_log consumer). Creating the observer changes no feed.
func (c *Client) Feed(space string) *Observer {
	c.T.Helper()
	a := c.Actor(space)
	c.Grant(space, a, domain.PermSpaceObserve, "")
	con := c.Consumer(space, a, domain.ViewSpaceLog, nil)
	tok, _ := c.Token(space, a, "")
	return &Observer{c: c, actor: a, consumer: con, token: tok}
}

// Observer reads a whole space feed.
type Observer struct {
	c        *Client
	actor    string
	consumer string
	token    string
}

// ActorID is the observer's actor.
func (o *Observer) ActorID() string { return o.actor }

// ConsumerID is the observer's space_log consumer.
func (o *Observer) ConsumerID() string { return o.consumer }

// Token is the observer's all-scopes token.
func (o *Observer) Token() string { return o.token }

// All returns the whole feed of the space, checking that visible_seq strictly increases from 1 on. A store
// may skip values (a transaction that reserved one and did not commit), so gaps are allowed.
func (o *Observer) All() []domain.FeedItem {
	o.c.T.Helper()
	items, _ := o.c.ReadAll(o.c.Principal(o.token), o.consumer, nil, 200)
	var last uint64
	for i, it := range items {
		seq, err := strconv.ParseUint(it.VisibleSeq, 10, 64)
		if err != nil || seq <= last {
			o.c.T.Fatalf("space feed out of order: item %d has visible_seq %s after %d (%s %s)", i, it.VisibleSeq, last, it.ItemType, it.ItemID)
		}
		last = seq
	}
	return items
}

// CodeOf returns the public error code of err, or "" for nil.
func CodeOf(err error) domain.Code {
	if err == nil {
		return ""
	}
	return domain.CodeOf(err)
}

// WantCode fails t unless err carries the public code want.
func WantCode(t TB, what string, err error, want domain.Code) {
	t.Helper()
	if got := CodeOf(err); got != want {
		t.Fatalf("%s: got error %v (code %q), want code %s", what, err, got, want)
	}
}

// SameError reports whether two errors look the same to a client: same code, message and detail keys
// (detail values may differ only where they echo the caller's own input, which the caller compares).
func SameError(a, b error) bool {
	var ea, eb *domain.Error
	if !errors.As(a, &ea) || !errors.As(b, &eb) {
		return false
	}
	wa, wb := ea.Wire(), eb.Wire()
	if wa.Code != wb.Code || wa.Message != wb.Message || wa.Retryable != wb.Retryable || len(wa.Details) != len(wb.Details) {
		return false
	}
	for k := range wa.Details {
		if _, ok := wb.Details[k]; !ok {
			return false
		}
	}
	return true
}
