package domaintest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/waypost/waypost/domain"
)

// propP09 is property P09 (authorization), over random traffic and a random choice of what to take away:
//
//   - Another space's principal, and a principal of the same space the objects are not addressed to, get
//     NOT_FOUND for message IDs (message.get, in_reply_to), consumers (inbox.read), feed items (inbox.ack),
//     recipients (message.send) and request IDs (status) — the same code, message and detail keys as for
//     IDs that do not exist.
//   - A token without the needed scope (message.send, message.read, receipt.write; space.observe scope or
//     grant for a space_log consumer) or bound to another consumer gets FORBIDDEN, even to replay a
//     committed request, and nothing changes.
//   - After RevokeToken, RevokeActor or expiry (the clock reaches expires_at), Authenticate answers
//     UNAUTHENTICATED exactly as for a token never issued, so no operation — not even an idempotent replay —
//     is reachable with it; a write already authenticated before the revocation does not commit
//     (UNAUTHENTICATED); the idempotency key does not include the token, so after a token revocation a new
//     token of the same actor replays the same result.
func propP09(t *testing.T, nb NewBackend, cfg propConfig) {
	cfg.check(t, nb, func(rt *rapid.T, f *Fixture) {
		c := f.With(rt)
		ctx := context.Background()
		space := c.Space()
		sp := space.SpaceID
		a, b, by := c.Party(sp), c.Party(sp), c.Party(sp)
		obs := c.Feed(sp)
		z := c.Party(c.Space().SpaceID)

		var reqs []domain.SendRequest
		var msgs []domain.SendResult
		for range rapid.IntRange(1, 3).Draw(rt, "messages") {
			req := domain.SendRequest{RequestID: c.RID("send"), RecipientIDs: []string{b.ActorID}, Subject: "s", Body: &domain.MessageBody{Text: drawBody(rt, "t")}}
			res, err := c.Svc.SendMessage(ctx, a.P, req)
			if err != nil {
				rt.Fatalf("send: %v", err)
			}
			reqs, msgs = append(reqs, req), append(msgs, res)
		}
		items, _ := c.ReadAll(b.P, b.ConsumerID, nil, 10)
		if _, err := c.Svc.Ack(ctx, b.P, domain.AckRequest{RequestID: c.RID("ack"), ConsumerID: b.ConsumerID,
			Items: []domain.AckEntry{{ItemID: items[0].ItemID, Stage: domain.StageReceived}}}); err != nil {
			rt.Fatalf("ack: %v", err)
		}
		feedLen := len(obs.All())
		unchanged := func(what string) {
			rt.Helper()
			if n := len(obs.All()); n != feedLen {
				rt.Fatalf("%s changed the feed: %d items, before %d", what, n, feedLen)
			}
		}
		msg := msgs[rapid.IntRange(0, len(msgs)-1).Draw(rt, "message")]
		item := items[rapid.IntRange(0, len(items)-1).Draw(rt, "item")]

		// Objects this principal may not see are NOT_FOUND, indistinguishable from absent ones.
		hidden := func(who string, p *domain.Principal, consumer string) {
			rt.Helper()
			same := func(what string, got, absent error) {
				rt.Helper()
				WantCode(rt, who+": "+what, got, domain.CodeNotFound)
				if !SameError(got, absent) {
					rt.Fatalf("%s: %s: %v is distinguishable from the answer for an absent ID: %v", who, what, got, absent)
				}
			}
			_, e1 := c.Svc.GetMessage(ctx, p, msg.MessageID)
			_, e2 := c.Svc.GetMessage(ctx, p, "msg_absent000000000000")
			same("message.get", e1, e2)
			_, e1 = c.Svc.ReadInbox(ctx, p, domain.ReadRequest{ConsumerID: b.ConsumerID})
			_, e2 = c.Svc.ReadInbox(ctx, p, domain.ReadRequest{ConsumerID: "con_absent000000000000"})
			same("inbox.read of another's consumer", e1, e2)
			ack := func(id string) error {
				_, err := c.Svc.Ack(ctx, p, domain.AckRequest{RequestID: c.RID("ack"), ConsumerID: consumer, Items: []domain.AckEntry{{ItemID: id, Stage: domain.StageProcessed}}})
				return err
			}
			same("inbox.ack of an item", ack(item.ItemID), ack("it_zzzz_00000000deadbeef"))
			reply := func(id string) error {
				_, err := c.Svc.SendMessage(ctx, p, domain.SendRequest{RequestID: c.RID("send"), RecipientIDs: []string{p.ActorID},
					InReplyTo: &id, Body: &domain.MessageBody{Text: "re"}})
				return err
			}
			same("in_reply_to", reply(msg.MessageID), reply("msg_absent000000000000"))
			_, e1 = c.Svc.Status(ctx, p, domain.OpMessageSend, reqs[0].RequestID)
			_, e2 = c.Svc.Status(ctx, p, domain.OpMessageSend, "never-used")
			same("status of another's request", e1, e2)
		}
		if rapid.Bool().Draw(rt, "from another space") {
			hidden("another space", z.P, z.ConsumerID)
		} else {
			hidden("an actor of the space the message is not addressed to", by.P, by.ConsumerID)
		}
		to := func(id string) error {
			_, err := c.Svc.SendMessage(ctx, z.P, domain.SendRequest{RequestID: c.RID("send"), RecipientIDs: []string{id}, Body: &domain.MessageBody{Text: "x"}})
			return err
		}
		if e1, e2 := to(b.ActorID), to("act_absent000000000000"); CodeOf(e1) != domain.CodeNotFound || !SameError(e1, e2) {
			rt.Fatalf("a recipient of another space: %v; absent recipient: %v", e1, e2)
		}
		unchanged("requests for hidden objects")

		// A missing scope is FORBIDDEN, even for a replay, and changes nothing.
		without := func(p Party, missing domain.Scope) *domain.Principal {
			var scopes []domain.Scope
			for _, s := range domain.AllScopes() {
				if s != missing {
					scopes = append(scopes, s)
				}
			}
			tok, _ := c.Token(sp, p.ActorID, "", scopes...)
			return c.Principal(tok)
		}
		switch rapid.IntRange(0, 5).Draw(rt, "missing") {
		case 0:
			_, err := c.Svc.SendMessage(ctx, without(a, domain.ScopeMessageSend), reqs[0])
			WantCode(rt, "replayed send without message.send", err, domain.CodeForbidden)
		case 1:
			_, err := c.Svc.ReadInbox(ctx, without(b, domain.ScopeMessageRead), domain.ReadRequest{ConsumerID: b.ConsumerID})
			WantCode(rt, "read without message.read", err, domain.CodeForbidden)
		case 2:
			_, err := c.Svc.Ack(ctx, without(b, domain.ScopeReceiptWrite), domain.AckRequest{RequestID: c.RID("ack"), ConsumerID: b.ConsumerID,
				Items: []domain.AckEntry{{ItemID: item.ItemID, Stage: domain.StageProcessed}}})
			WantCode(rt, "ack without receipt.write", err, domain.CodeForbidden)
		case 3:
			log := c.Consumer(sp, b.ActorID, domain.ViewSpaceLog, nil)
			_, err := c.Svc.ReadInbox(ctx, b.P, domain.ReadRequest{ConsumerID: log})
			WantCode(rt, "space_log read with the scope but without a space.observe grant", err, domain.CodeForbidden)
		case 4:
			c.Grant(sp, b.ActorID, domain.PermSpaceObserve, "")
			log := c.Consumer(sp, b.ActorID, domain.ViewSpaceLog, nil)
			_, err := c.Svc.ReadInbox(ctx, without(b, domain.ScopeSpaceObserve), domain.ReadRequest{ConsumerID: log})
			WantCode(rt, "space_log read with the grant but without the space.observe scope", err, domain.CodeForbidden)
		case 5:
			other := c.Consumer(sp, b.ActorID, domain.ViewInbox, nil)
			tok, _ := c.Token(sp, b.ActorID, other)
			_, err := c.Svc.ReadInbox(ctx, c.Principal(tok), domain.ReadRequest{ConsumerID: b.ConsumerID})
			WantCode(rt, "read with a token bound to another consumer", err, domain.CodeForbidden)
		}
		unchanged("requests without the scope")

		// Take a credential away.
		never, errNever := c.Svc.Authenticate(ctx, "wpt_"+fmt.Sprintf("%043d", 7))
		if never != nil || CodeOf(errNever) != domain.CodeUnauthenticated {
			rt.Fatalf("a token never issued: %v %v", never, errNever)
		}
		gone := func(what, token string) {
			rt.Helper()
			_, e := c.Svc.Authenticate(ctx, token)
			WantCode(rt, what, e, domain.CodeUnauthenticated)
			if !SameError(e, errNever) {
				rt.Fatalf("%s: %v is distinguishable from a token never issued: %v", what, e, errNever)
			}
		}
		target := a
		if rapid.Bool().Draw(rt, "revoke the reader") {
			target = b
		}
		stale := c.Principal(target.Token) // authenticated before the revocation, still in flight
		staleWrite := func() {
			rt.Helper()
			var err error
			if target == a {
				_, err = c.Svc.SendMessage(ctx, stale, domain.SendRequest{RequestID: c.RID("send"), RecipientIDs: []string{b.ActorID}, Body: &domain.MessageBody{Text: drawBody(rt, "late")}})
			} else {
				_, err = c.Svc.Ack(ctx, stale, domain.AckRequest{RequestID: c.RID("ack"), ConsumerID: b.ConsumerID,
					Items: []domain.AckEntry{{ItemID: item.ItemID, Stage: domain.StageProcessed}}})
			}
			WantCode(rt, "a write authenticated before the revocation", err, domain.CodeUnauthenticated)
			unchanged("a write authenticated before the revocation")
		}
		switch rapid.IntRange(0, 2).Draw(rt, "revocation") {
		case 0:
			if _, err := c.Svc.RevokeToken(ctx, sp, target.TokenID); err != nil {
				rt.Fatalf("RevokeToken: %v", err)
			}
			gone("a revoked token", target.Token)
			staleWrite()
			if target == a {
				// the key is (space, producer, operation, request_id): a new token replays the result
				fresh, _ := c.Token(sp, a.ActorID, "")
				res, err := c.Svc.SendMessage(ctx, c.Principal(fresh), reqs[0])
				if err != nil || !mSameSend(res, msgs[0]) {
					rt.Fatalf("replay with a new token of the producer: %+v %v, want %+v", res, err, msgs[0])
				}
			}
		case 1:
			second, _ := c.Token(sp, target.ActorID, "")
			if _, err := c.Svc.RevokeActor(ctx, sp, target.ActorID); err != nil {
				rt.Fatalf("RevokeActor: %v", err)
			}
			gone("a token of a revoked actor", target.Token)
			gone("another token of a revoked actor", second)
			staleWrite()
			_, err := c.Svc.CreateToken(ctx, sp, domain.CreateTokenRequest{RequestID: c.RID("tok"), ActorID: target.ActorID, Scopes: domain.AllScopes()})
			WantCode(rt, "a new token for a revoked actor", err, domain.CodeNotFound)
		case 2:
			d := time.Duration(rapid.IntRange(1, 7200).Draw(rt, "lifetime s")) * time.Second
			expires := f.Clock.Now().Add(d)
			tok, _ := c.TokenExpiring(sp, target.ActorID, "", &expires)
			p := c.Principal(tok)
			if target == a {
				if res, err := c.Svc.SendMessage(ctx, p, reqs[0]); err != nil || !mSameSend(res, msgs[0]) {
					rt.Fatalf("replay before expiry: %+v %v", res, err)
				}
			}
			f.Clock.Advance(d - time.Second)
			c.Principal(tok) // one second before expires_at: still valid
			f.Clock.Advance(time.Second)
			gone("a token at its expires_at", tok)
			f.Clock.Advance(time.Duration(rapid.IntRange(0, 3600).Draw(rt, "later s")) * time.Second)
			gone("an expired token", tok)
		}
		unchanged("the revocation")
	})
}
