package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/waypost/waypost/e2e/wire"
	"github.com/waypost/waypost/internal/testjson"
)

// errCase is one row of TestErrorCodesOverHTTP: a request that must fail with code and leave no side
// effect, and the corrected request (same request_id where there is one) that must then succeed.
type errCase struct {
	name string
	rq   request
	code string
	// echo is the request_id the error envelope must carry (the request's own, when it was readable).
	echo string
	// op and rid name a submission that must not exist after the failure (status → NOT_FOUND), checked
	// with statusToken.
	op, rid, statusToken string
	// check inspects the error response further.
	check func(t *testing.T, r response)
	// fix is the corrected request; it must succeed and publish exactly publishes feed items.
	fix       *request
	publishes int
	// before runs first (for cases that need fresh state or time to pass).
	before func(t *testing.T)
}

// TestErrorCodesOverHTTP drives every error code reachable in M0 over HTTP (SUPPLEMENT §11.4): the HTTP
// status, retryable flag and error envelope schema of each, that the failure leaves no side effect (the
// space's feed head does not move and a send's request_id stays unused), and that the same request_id then
// works with a corrected body.
func TestErrorCodesOverHTTP(t *testing.T) {
	s := startServer(t)
	adm := newSpace(t, s, "errors")
	a := adm.participant(t, "A")
	b := adm.participant(t, "B")
	c := adm.participant(t, "C")
	obs := adm.observer(t)

	// Another space, with a message of its own.
	adm2 := newSpace(t, s, "elsewhere")
	x := adm2.participant(t, "X")
	y := adm2.participant(t, "Y")
	foreign := send(t, s, x.token, map[string]any{"request_id": "x-1", "recipient_ids": []string{y.actor}, "body": map[string]any{"text": "other space"}})

	// Tokens with missing scopes, a second consumer of B, a revoked, a rotated and an expiring token.
	aReadOnly := adm.token(t, a.actor, a.consumer, "message.read").Token
	bNoRead := adm.token(t, b.actor, b.consumer, "receipt.write").Token
	bNoAck := adm.token(t, b.actor, b.consumer, "message.read").Token
	b2 := participant{actor: b.actor, consumer: adm.consumer(t, b.actor, "inbox")}
	b2.token = adm.token(t, b.actor, b2.consumer, allScopes...).Token
	revoked := adm.token(t, a.actor, "", "message.send")
	rotated := adm.token(t, a.actor, "", "message.send")
	expiresAt := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
	expiring, _ := ok[wire.Token](t, s, request{Method: "POST", Path: adm.path("/tokens"), Token: adminSecret,
		Body: map[string]any{"request_id": "token-expiring", "actor_id": a.actor, "scopes": []string{"message.send"}, "expires_at": expiresAt.UTC().Format(time.RFC3339)}})
	for _, tok := range []string{revoked.Token, rotated.Token, expiring.Token} {
		ok[map[string]any](t, s, request{Method: "GET", Path: "/v0/describe", Token: tok}) // each works before it stops working
	}
	beforeRevoke := send(t, s, revoked.Token, map[string]any{"request_id": "e-before-revoke", "recipient_ids": []string{b.actor}, "body": map[string]any{"text": "sent before the revocation"}})
	ok[map[string]any](t, s, request{Method: "POST", Path: adm.path("/tokens/" + revoked.TokenID + "/revoke"), Token: adminSecret})
	newSecret, _ := ok[wire.Token](t, s, request{Method: "POST", Path: adm.path("/tokens/" + rotated.TokenID + "/rotate"), Token: adminSecret})
	gone := adm.participant(t, "revoked actor")
	ok[map[string]any](t, s, request{Method: "POST", Path: adm.path("/actors/" + gone.actor + "/revoke"), Token: adminSecret})
	// An actor with a space_log consumer but no space.observe grant.
	noObs := participant{actor: adm.actor(t, "no observe")}
	noObs.consumer = adm.consumer(t, noObs.actor, "space_log")
	noObs.token = adm.token(t, noObs.actor, noObs.consumer, "message.read", "space.observe").Token
	// 31 more actors: with B, exactly max_recipients (32) distinct recipients.
	recipients := []string{b.actor}
	for i := 0; i < 31; i++ {
		recipients = append(recipients, adm.actor(t, fmt.Sprintf("R%d", i)))
	}

	// Items to ack: A → B, and A → C (invisible to B's consumer).
	toB := send(t, s, a.token, map[string]any{"request_id": "warm-b", "recipient_ids": []string{b.actor}, "body": map[string]any{"text": "hi B"}})
	toC := send(t, s, a.token, map[string]any{"request_id": "warm-c", "recipient_ids": []string{c.actor}, "body": map[string]any{"text": "hi C"}})
	bPage := read(t, s, b, nil, 50)
	bItem := bPage.Feed(t)[0].ItemID
	cItem := read(t, s, c, nil, 50).Feed(t)[0].ItemID
	b2Cursor := read(t, s, b2, nil, 50).NextCursor
	// A consumer whose view will change (PATCH) after we hold its cursor.
	e := adm.participant(t, "E")
	send(t, s, a.token, map[string]any{"request_id": "warm-e", "recipient_ids": []string{e.actor}, "body": map[string]any{"text": "hi E"}})
	ePage := read(t, s, e, nil, 50)
	eItem := ePage.Feed(t)[0].ItemID
	patched, _ := ok[wire.Consumer](t, s, request{Method: "PATCH", Path: adm.path("/consumers/" + e.consumer), Token: adminSecret,
		Body: map[string]any{"filter": map[string]any{"item_types": []string{"message", "receipt"}}}})
	if patched.ViewRevision != 2 {
		t.Fatalf("PATCH consumer: view_revision %d, want 2", patched.ViewRevision)
	}
	// The send whose request_id is reused with other content.
	conflicted := send(t, s, a.token, map[string]any{"request_id": "e-conflict", "recipient_ids": []string{b.actor}, "subject": "first", "body": map[string]any{"text": "x"}})
	ack(t, s, b, "e-ack-conflict", []map[string]string{{"item_id": bItem, "stage": "received"}}, nil)

	// The observer's position: after every failure, nothing new may be in the space's feed.
	_, head := readAll(t, s, obs, nil)

	msg := func(rid string, extra ...any) map[string]any {
		m := map[string]any{"request_id": rid, "recipient_ids": []string{b.actor}, "subject": "s", "body": map[string]any{"text": "corrected"}}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i].(string)] = extra[i+1]
		}
		return m
	}
	post := func(token string, body any) request {
		return request{Method: "POST", Path: "/v0/messages", Token: token, Body: body}
	}
	sendCase := func(name, rid string, body any, code string, echo bool) errCase {
		c := errCase{name: name, rq: post(a.token, body), code: code, op: "message.send", rid: rid, statusToken: a.token,
			fix: ptr(post(a.token, msg(rid))), publishes: 1}
		if echo {
			c.echo = rid
		}
		return c
	}
	readRq := func(p participant, token string, cursor any) request {
		return request{Method: "POST", Path: "/v0/inbox/read", Token: token, Body: map[string]any{"consumer_id": p.consumer, "cursor": cursor}}
	}
	ackRq := func(p participant, token, rid string, items []map[string]string, cp any) request {
		body := map[string]any{"request_id": rid, "consumer_id": p.consumer, "items": items}
		if cp != nil {
			body["checkpoint_cursor"] = cp
		}
		return request{Method: "POST", Path: "/v0/inbox/ack", Token: token, Body: body}
	}
	ackCase := func(name string, rq request, code, rid string, fix request, publishes int) errCase {
		return errCase{name: name, rq: rq, code: code, echo: rid, op: "inbox.ack", rid: rid, statusToken: b.token, fix: &fix, publishes: publishes}
	}
	tampered := []byte(bPage.NextCursor)
	tampered[len(tampered)/3] ^= 0x01 // still base64url-ish, but the MAC no longer matches
	euro := strings.Repeat("€", 171)  // 513 bytes, 171 characters
	nested := func(levels int) map[string]any {
		m := map[string]any{"leaf": true}
		for i := 1; i < levels; i++ {
			m = map[string]any{"n": m}
		}
		return m
	}
	var thirtyThree []string
	for i := 0; i < 33; i++ {
		thirtyThree = append(thirtyThree, fmt.Sprintf("act_r%02d", i))
	}
	var sixtyFive []string
	for i := 0; i < 65; i++ {
		sixtyFive = append(sixtyFive, fmt.Sprintf("act_r%02d", i))
	}
	var manyItems []map[string]string
	for i := 0; i < 101; i++ {
		manyItems = append(manyItems, map[string]string{"item_id": fmt.Sprintf("it_%d_0000", i+1), "stage": "received"})
	}
	// padded returns the send body for rid, padded with JSON whitespace to exactly n bytes.
	padded := func(rid string, n int) raw {
		b := testjson.Marshal(t, msg(rid))
		return raw(append(b[:len(b)-1:len(b)-1], append(bytes.Repeat([]byte(" "), n-len(b)), '}')...))
	}
	// A body.text that makes the whole request one byte over max_request_bytes.
	tooBig := testjson.Marshal(t, msg("e-too-large", "body", map[string]any{"text": strings.Repeat("x", 65536)}))

	cases := []errCase{
		// INVALID_REQUEST: strict JSON.
		sendCase("duplicate key", "e-dup", raw(`{"request_id":"e-dup","recipient_ids":["`+b.actor+`"],"subject":"a","subject":"b","body":{"text":"x"}}`), "INVALID_REQUEST", false),
		sendCase("duplicate nested key", "e-dup2", raw(`{"request_id":"e-dup2","recipient_ids":["`+b.actor+`"],"body":{"text":"x","text":"y"}}`), "INVALID_REQUEST", false),
		sendCase("undeclared field", "e-undeclared", msg("e-undeclared", "priority", 1), "INVALID_REQUEST", true),
		sendCase("undeclared nested field", "e-undeclared2", msg("e-undeclared2", "body", map[string]any{"text": "x", "html": "<b>x</b>"}), "INVALID_REQUEST", true),
		sendCase("NaN", "e-nan", raw(`{"request_id":"e-nan","recipient_ids":["`+b.actor+`"],"body":{"text":"x"},"metadata":{"n":NaN}}`), "INVALID_REQUEST", false),
		sendCase("1e400", "e-inf", raw(`{"request_id":"e-inf","recipient_ids":["`+b.actor+`"],"body":{"text":"x"},"metadata":{"n":1e400}}`), "INVALID_REQUEST", false),
		sendCase("-1e400 in a nested array", "e-ninf", raw(`{"request_id":"e-ninf","recipient_ids":["`+b.actor+`"],"body":{"text":"x"},"metadata":{"a":[1,{"b":-1e400}]}}`), "INVALID_REQUEST", false),
		sendCase("invalid UTF-8", "e-utf8", raw("{\"request_id\":\"e-utf8\",\"recipient_ids\":[\""+b.actor+"\"],\"subject\":\"\xff\xfe\",\"body\":{\"text\":\"x\"}}"), "INVALID_REQUEST", false),
		sendCase("truncated JSON", "e-trunc", raw(`{"request_id":"e-trunc","body":{"text":"x"}`), "INVALID_REQUEST", false),
		sendCase("trailing data", "e-trail", raw(`{"request_id":"e-trail","recipient_ids":["`+b.actor+`"],"body":{"text":"x"}} {}`), "INVALID_REQUEST", false),
		sendCase("not an object", "e-array", raw(`[]`), "INVALID_REQUEST", false),
		// INVALID_REQUEST: IDs, schema and types.
		sendCase("bad recipient ID", "e-badid", msg("e-badid", "recipient_ids", []string{"not an id!"}), "INVALID_REQUEST", true),
		sendCase("recipient ID over 96 bytes", "e-longid", msg("e-longid", "recipient_ids", []string{strings.Repeat("a", 97)}), "INVALID_REQUEST", true),
		sendCase("bad thread_id", "e-badthread", msg("e-badthread", "thread_id", "a/b"), "INVALID_REQUEST", true),
		{name: "bad request_id", rq: post(a.token, msg("bad request id")), code: "INVALID_REQUEST",
			fix: ptr(post(a.token, msg("e-good-rid"))), publishes: 1},
		sendCase("schema: body missing", "e-nobody", map[string]any{"request_id": "e-nobody", "recipient_ids": []string{b.actor}}, "INVALID_REQUEST", true),
		sendCase("schema: kind pattern", "e-kind", msg("e-kind", "kind", "Not A Kind"), "INVALID_REQUEST", true),
		sendCase("schema: reply without recipients", "e-reply-norcpt", map[string]any{"request_id": "e-reply-norcpt", "in_reply_to": toB.ResourceID, "body": map[string]any{"text": "x"}}, "INVALID_REQUEST", true),
		sendCase("wrong JSON type: subject number", "e-type", msg("e-type", "subject", 42), "INVALID_REQUEST", true),
		sendCase("wrong JSON type: recipients string", "e-type2", msg("e-type2", "recipient_ids", b.actor), "INVALID_REQUEST", true),
		sendCase("wrong JSON type: subject null", "e-type3", msg("e-type3", "subject", nil), "INVALID_REQUEST", true),
		{name: "inbox.read undeclared field", rq: request{Method: "POST", Path: "/v0/inbox/read", Token: b.token,
			Body: map[string]any{"consumer_id": b.consumer, "since": 3}}, code: "INVALID_REQUEST", fix: ptr(readRq(b, b.token, nil))},
		{name: "inbox.read limit 0", rq: request{Method: "POST", Path: "/v0/inbox/read", Token: b.token,
			Body: map[string]any{"consumer_id": b.consumer, "limit": 0}}, code: "INVALID_REQUEST", fix: ptr(readRq(b, b.token, nil))},
		ackCase("ack unknown stage", ackRq(b, b.token, "e-ack-stage", []map[string]string{{"item_id": bItem, "stage": "done"}}, nil), "INVALID_REQUEST", "e-ack-stage",
			ackRq(b, b.token, "e-ack-stage", []map[string]string{{"item_id": bItem, "stage": "processed"}}, nil), 1),
		{name: "status: unknown operation", rq: request{Method: "GET", Path: "/v0/status?operation=message.get&request_id=warm-b", Token: a.token}, code: "INVALID_REQUEST",
			fix: ptr(request{Method: "GET", Path: "/v0/status?operation=message.send&request_id=warm-b", Token: a.token})},

		// UNAUTHENTICATED.
		sendCase("missing token", "e-notoken", msg("e-notoken"), "UNAUTHENTICATED", false),
		sendCase("malformed token", "e-badtoken", msg("e-badtoken"), "UNAUTHENTICATED", false),
		sendCase("wrong scheme", "e-basic", msg("e-basic"), "UNAUTHENTICATED", false),
		sendCase("well-formed unknown token", "e-unknowntoken", msg("e-unknowntoken"), "UNAUTHENTICATED", false),
		sendCase("revoked token", "e-revoked", msg("e-revoked"), "UNAUTHENTICATED", false),
		sendCase("rotated-away secret", "e-rotated", msg("e-rotated"), "UNAUTHENTICATED", false),
		sendCase("expired token", "e-expired", msg("e-expired"), "UNAUTHENTICATED", false),
		// A revoked credential gets nothing, not even the stored result of its own earlier send (P09); the
		// actor's valid token still gets that result.
		{name: "revoked token replaying its committed send", code: "UNAUTHENTICATED",
			rq: request{Method: "POST", Path: "/v0/messages", Token: revoked.Token,
				Body: map[string]any{"request_id": "e-before-revoke", "recipient_ids": []string{b.actor}, "body": map[string]any{"text": "sent before the revocation"}}},
			fix: &request{Method: "POST", Path: "/v0/messages", Token: a.token,
				Body: map[string]any{"request_id": "e-before-revoke", "recipient_ids": []string{b.actor}, "body": map[string]any{"text": "sent before the revocation"}}},
			check: func(t *testing.T, r response) {
				if strings.Contains(string(r.Body), beforeRevoke.ResourceID) {
					t.Fatalf("the revoked token learned the message ID: %s", r)
				}
			}},
		sendCase("token of a revoked actor", "e-gone", msg("e-gone"), "UNAUTHENTICATED", false),
		sendCase("admin secret on the data plane", "e-adminsecret", msg("e-adminsecret"), "UNAUTHENTICATED", false),
		{name: "wrong admin secret", rq: request{Method: "POST", Path: "/admin/v0/spaces", Token: adminSecret + "x",
			Body: map[string]any{"request_id": "space-wrong-secret"}}, code: "UNAUTHENTICATED",
			fix: &request{Method: "POST", Path: "/admin/v0/spaces", Token: adminSecret, Body: map[string]any{"request_id": "space-wrong-secret"}}},
		{name: "data token on the control plane", rq: request{Method: "GET", Path: adm.path(""), Token: a.token}, code: "UNAUTHENTICATED",
			fix: &request{Method: "GET", Path: adm.path(""), Token: adminSecret}},

		// FORBIDDEN.
		sendCase("send without message.send", "e-noscope", msg("e-noscope"), "FORBIDDEN", false),
		{name: "read without message.read", rq: readRq(b, bNoRead, nil), code: "FORBIDDEN", fix: ptr(readRq(b, b.token, nil))},
		ackCase("ack without receipt.write", ackRq(b, bNoAck, "e-ack-noscope", []map[string]string{{"item_id": bItem, "stage": "processed"}}, nil), "FORBIDDEN", "e-ack-noscope",
			ackRq(b2, b2.token, "e-ack-noscope", []map[string]string{{"item_id": bItem, "stage": "processed"}}, nil), 1),
		{name: "token bound to another consumer", rq: readRq(b2, b.token, nil), code: "FORBIDDEN", fix: ptr(readRq(b2, b2.token, nil))},
		{name: "space_log without the space.observe grant", rq: readRq(noObs, noObs.token, nil), code: "FORBIDDEN", fix: ptr(readRq(obs, obs.token, nil))},

		// NOT_FOUND, never revealing whether the object exists elsewhere.
		{name: "unknown message", rq: request{Method: "GET", Path: "/v0/messages/msg_00000000000000000000", Token: a.token}, code: "NOT_FOUND",
			fix: &request{Method: "GET", Path: "/v0/messages/" + toB.ResourceID, Token: a.token}},
		{name: "another space's message", rq: request{Method: "GET", Path: "/v0/messages/" + foreign.ResourceID, Token: a.token}, code: "NOT_FOUND",
			check: func(t *testing.T, r response) {
				absent := fail(t, s, request{Method: "GET", Path: "/v0/messages/msg_zzzzzzzzzzzzzzzzzzzz", Token: a.token}, "NOT_FOUND")
				sameBody(t, r, foreign.ResourceID, absent, "msg_zzzzzzzzzzzzzzzzzzzz")
			}},
		{name: "same-space message not addressed to the caller", rq: request{Method: "GET", Path: "/v0/messages/" + toC.ResourceID, Token: b.token}, code: "NOT_FOUND",
			check: func(t *testing.T, r response) {
				absent := fail(t, s, request{Method: "GET", Path: "/v0/messages/msg_zzzzzzzzzzzzzzzzzzzz", Token: b.token}, "NOT_FOUND")
				sameBody(t, r, toC.ResourceID, absent, "msg_zzzzzzzzzzzzzzzzzzzz")
			},
			fix: &request{Method: "GET", Path: "/v0/messages/" + toC.ResourceID, Token: c.token}},
		{name: "unknown route", rq: request{Method: "GET", Path: "/v0/nope", Token: a.token}, code: "NOT_FOUND"},
		{name: "unknown admin route", rq: request{Method: "GET", Path: "/admin/v0/nope", Token: adminSecret}, code: "NOT_FOUND"},
		{name: "unknown space", rq: request{Method: "GET", Path: "/admin/v0/spaces/sp_nope", Token: adminSecret}, code: "NOT_FOUND"},
		sendCase("unknown recipient", "e-norcpt", msg("e-norcpt", "recipient_ids", []string{"act_nope"}), "NOT_FOUND", true),
		func() errCase {
			c := sendCase("recipient in another space", "e-foreignrcpt", msg("e-foreignrcpt", "recipient_ids", []string{y.actor}), "NOT_FOUND", true)
			c.check = func(t *testing.T, r response) {
				absent := fail(t, s, post(a.token, msg("e-norcpt-2", "recipient_ids", []string{"act_nope"})), "NOT_FOUND")
				sameBody(t, r, y.actor, absent, "act_nope")
			}
			return c
		}(),
		sendCase("reply to another space's message", "e-foreignreply", msg("e-foreignreply", "in_reply_to", foreign.ResourceID), "NOT_FOUND", true),
		{name: "unknown consumer", rq: request{Method: "POST", Path: "/v0/inbox/read", Token: b.token, Body: map[string]any{"consumer_id": "con_nope"}}, code: "NOT_FOUND",
			fix: ptr(readRq(b, b.token, nil))},
		{name: "another actor's consumer", rq: readRq(b, a.token, nil), code: "NOT_FOUND"},
		ackCase("ack unknown item", ackRq(b, b.token, "e-ack-unknown", []map[string]string{{"item_id": "it_zz_0000000000000000", "stage": "received"}}, bPage.NextCursor), "NOT_FOUND", "e-ack-unknown",
			ackRq(b, b.token, "e-ack-unknown", []map[string]string{{"item_id": bItem, "stage": "received"}}, bPage.NextCursor), 0),
		ackCase("ack an item the consumer cannot see", ackRq(b, b.token, "e-ack-invisible", []map[string]string{{"item_id": bItem, "stage": "processed"}, {"item_id": cItem, "stage": "processed"}}, nil), "NOT_FOUND", "e-ack-invisible",
			ackRq(b, b.token, "e-ack-invisible", []map[string]string{{"item_id": bItem, "stage": "processed"}}, nil), 0),
		{name: "status of an unknown request", rq: request{Method: "GET", Path: "/v0/status?operation=message.send&request_id=never-sent", Token: a.token}, code: "NOT_FOUND"},
		{name: "status of another actor's request", rq: request{Method: "GET", Path: "/v0/status?operation=message.send&request_id=warm-b", Token: b.token}, code: "NOT_FOUND",
			fix: ptr(request{Method: "GET", Path: "/v0/status?operation=message.send&request_id=warm-b", Token: a.token})},

		// IDEMPOTENCY_CONFLICT: nothing changes, and the original request still gets its original result.
		{name: "send: request_id reused with other content", rq: post(a.token, map[string]any{"request_id": "e-conflict", "recipient_ids": []string{b.actor}, "subject": "second", "body": map[string]any{"text": "x"}}),
			code: "IDEMPOTENCY_CONFLICT", echo: "e-conflict",
			fix: ptr(post(a.token, map[string]any{"request_id": "e-conflict", "recipient_ids": []string{b.actor}, "subject": "first", "body": map[string]any{"text": "x"}})),
			check: func(t *testing.T, r response) {
				st, _ := ok[wire.Status](t, s, request{Method: "GET", Path: "/v0/status?operation=message.send&request_id=e-conflict", Token: a.token})
				if st.SubmissionState != "committed" || st.ResourceID != conflicted.ResourceID {
					t.Fatalf("status after the conflict: %+v, want the original %s", st, conflicted.ResourceID)
				}
			}},
		{name: "ack: request_id reused with other items", rq: ackRq(b, b.token, "e-ack-conflict", []map[string]string{{"item_id": bItem, "stage": "processed"}}, nil),
			code: "IDEMPOTENCY_CONFLICT", echo: "e-ack-conflict",
			fix: ptr(ackRq(b, b.token, "e-ack-conflict", []map[string]string{{"item_id": bItem, "stage": "received"}}, nil))},
		{name: "admin: space request_id reused with another name", rq: request{Method: "POST", Path: "/admin/v0/spaces", Token: adminSecret,
			Body: map[string]any{"request_id": "space-errors", "display_name": "not errors"}}, code: "IDEMPOTENCY_CONFLICT", echo: "space-errors",
			fix: &request{Method: "POST", Path: "/admin/v0/spaces", Token: adminSecret, Body: map[string]any{"request_id": "space-errors", "display_name": "errors"}}},

		// INVALID_CURSOR.
		{name: "tampered cursor", rq: readRq(b, b.token, string(tampered)), code: "INVALID_CURSOR", fix: ptr(readRq(b, b.token, bPage.NextCursor))},
		{name: "foreign cursor", rq: readRq(b, b.token, "opaque_cursor"), code: "INVALID_CURSOR"},
		ackCase("tampered checkpoint_cursor", ackRq(b2, b2.token, "e-ack-badcp", []map[string]string{{"item_id": bItem, "stage": "received"}}, string(tampered)), "INVALID_CURSOR", "e-ack-badcp",
			ackRq(b2, b2.token, "e-ack-badcp", []map[string]string{{"item_id": bItem, "stage": "received"}}, b2Cursor), 0),

		// CURSOR_SCOPE_CHANGED.
		{name: "another consumer's cursor", rq: readRq(b, b.token, b2Cursor), code: "CURSOR_SCOPE_CHANGED", fix: ptr(readRq(b2, b2.token, b2Cursor))},
		{name: "cursor from before PATCH consumer", rq: readRq(e, e.token, ePage.NextCursor), code: "CURSOR_SCOPE_CHANGED", fix: ptr(readRq(e, e.token, nil))},
		{name: "checkpoint from before PATCH consumer", rq: ackRq(e, e.token, "e-ack-oldview", []map[string]string{{"item_id": eItem, "stage": "received"}}, ePage.NextCursor),
			code: "CURSOR_SCOPE_CHANGED", echo: "e-ack-oldview", op: "inbox.ack", rid: "e-ack-oldview", statusToken: e.token,
			fix: ptr(ackRq(e, e.token, "e-ack-oldview", []map[string]string{{"item_id": eItem, "stage": "received"}}, nil)), publishes: 1},

		// RESOURCE_LIMIT.
		func() errCase {
			c := sendCase("subject over 512 bytes", "e-subject", msg("e-subject", "subject", euro), "RESOURCE_LIMIT", true)
			c.fix = ptr(post(a.token, msg("e-subject", "subject", strings.Repeat("€", 170)+"ab"))) // exactly 512 bytes
			return c
		}(),
		func() errCase {
			c := sendCase("more than 32 recipients", "e-recipients", msg("e-recipients", "recipient_ids", thirtyThree), "RESOURCE_LIMIT", true)
			// 33 entries but 32 after de-duplication: within the limit.
			c.fix = ptr(post(a.token, msg("e-recipients", "recipient_ids", append(append([]string{}, recipients...), recipients[7]))))
			return c
		}(),
		func() errCase {
			c := sendCase("body.text over 49152 bytes", "e-bodytext", msg("e-bodytext", "body", map[string]any{"text": strings.Repeat("b", 49153)}), "RESOURCE_LIMIT", true)
			c.fix = ptr(post(a.token, msg("e-bodytext", "body", map[string]any{"text": strings.Repeat("b", 49152)})))
			return c
		}(),
		sendCase("metadata over 8192 bytes", "e-metadata", msg("e-metadata", "metadata", map[string]any{"k": strings.Repeat("m", 8200)}), "RESOURCE_LIMIT", true),
		func() errCase {
			c := sendCase("metadata nested deeper than 8", "e-depth", msg("e-depth", "metadata", nested(9)), "RESOURCE_LIMIT", true)
			c.fix = ptr(post(a.token, msg("e-depth", "metadata", nested(8))))
			return c
		}(),
		ackCase("more than 100 ack items", ackRq(b, b.token, "e-ack-many", manyItems, nil), "RESOURCE_LIMIT", "e-ack-many",
			ackRq(b, b.token, "e-ack-many", manyItems[:0], bPage.NextCursor), 0),
		sendCase("65 distinct recipients", "e-recipients65", msg("e-recipients65", "recipient_ids", sixtyFive), "RESOURCE_LIMIT", true),
		{name: "inbox.read limit over inbox_page_max", rq: request{Method: "POST", Path: "/v0/inbox/read", Token: b.token,
			Body: map[string]any{"consumer_id": b.consumer, "limit": 201}}, code: "RESOURCE_LIMIT",
			fix: &request{Method: "POST", Path: "/v0/inbox/read", Token: b.token, Body: map[string]any{"consumer_id": b.consumer, "limit": 200}}},

		// PAYLOAD_TOO_LARGE: the raw size decides, before anything is parsed.
		func() errCase {
			c := sendCase("body over 65536 bytes", "e-too-large", raw(tooBig), "PAYLOAD_TOO_LARGE", false)
			c.fix = ptr(post(a.token, padded("e-too-large", 65536))) // exactly the limit
			return c
		}(),
		func() errCase {
			c := sendCase("chunked body over 65536 bytes", "e-too-large-chunked", padded("e-too-large-chunked", 65537), "PAYLOAD_TOO_LARGE", false)
			c.rq.Chunked = true
			return c
		}(),
	}
	// Per-case token and header variations of the send cases.
	for i := range cases {
		switch cases[i].name {
		case "missing token":
			cases[i].rq.Token = ""
		case "malformed token":
			cases[i].rq.Token = "not-a-token"
		case "wrong scheme":
			cases[i].rq.Auth = "Basic " + a.token
		case "well-formed unknown token":
			cases[i].rq.Token = "wpt_" + strings.Repeat("A", 43)
		case "revoked token":
			cases[i].rq.Token = revoked.Token
		case "rotated-away secret":
			cases[i].rq.Token = rotated.Token
			cases[i].check = func(t *testing.T, _ response) {
				ok[map[string]any](t, s, request{Method: "GET", Path: "/v0/describe", Token: newSecret.Token})
			}
		case "expired token":
			cases[i].rq.Token = expiring.Token
			cases[i].before = func(t *testing.T) { time.Sleep(time.Until(expiresAt.Add(100 * time.Millisecond))) }
		case "token of a revoked actor":
			cases[i].rq.Token = gone.token
		case "admin secret on the data plane":
			cases[i].rq.Token = adminSecret
		case "send without message.send":
			cases[i].rq.Token = aReadOnly
		}
	}

	// checkpoints returns the stored checkpoints of the consumers the cases ack with.
	checkpoints := func(t *testing.T) string {
		var out []string
		for _, p := range []participant{b, b2, e} {
			cp := read(t, s, p, nil, 1).CheckpointCursor
			if cp == nil {
				cp = ptr("<none>")
			}
			out = append(out, *cp)
		}
		return strings.Join(out, " ")
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before(t)
			}
			cpBefore := checkpoints(t)
			r := fail(t, s, tc.rq, tc.code)
			if tc.echo != "" && r.Env.RequestID != tc.echo {
				t.Errorf("error request_id %q, want the request's %q", r.Env.RequestID, tc.echo)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
			// No side effect: nothing was published, no checkpoint moved, and the request_id was not used up.
			if items, _ := readAll(t, s, obs, &head); len(items) != 0 {
				t.Fatalf("the failed request published %d feed items: %+v", len(items), items)
			}
			if cp := checkpoints(t); cp != cpBefore {
				t.Fatalf("the failed request moved a checkpoint:\n before %s\n after  %s", cpBefore, cp)
			}
			if tc.rid != "" {
				fail(t, s, request{Method: "GET", Token: tc.statusToken,
					Path: "/v0/status?" + url.Values{"operation": {tc.op}, "request_id": {tc.rid}}.Encode()}, "NOT_FOUND")
			}
			if tc.fix == nil {
				return
			}
			fixed, _ := ok[json.RawMessage](t, s, *tc.fix)
			items, next := readAll(t, s, obs, &head)
			if len(items) != tc.publishes {
				t.Fatalf("the corrected request published %d feed items, want %d", len(items), tc.publishes)
			}
			head = next
			if tc.fix.Path == "/v0/messages" {
				var d wire.Send
				if err := json.Unmarshal(fixed, &d); err != nil || d.SubmissionState != "committed" {
					t.Fatalf("corrected send: %s", fixed)
				}
				if tc.publishes == 1 && (items[0].ResourceID != d.ResourceID || items[0].VisibleSeq != d.VisibleSeq) {
					t.Fatalf("published %+v, want the corrected send %+v", items[0], d)
				}
			}
		})
	}
}

// sameBody checks that two error responses are identical except for their request_id and the object ID
// each names: NOT_FOUND must not tell "exists elsewhere" from "absent" (RFC §4.3).
func sameBody(t *testing.T, r1 response, id1 string, r2 response, id2 string) {
	t.Helper()
	norm := func(r response, id string) string {
		var m map[string]any
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "request_id")
		return strings.ReplaceAll(string(testjson.Marshal(t, m)), id, "<ID>")
	}
	if a, b := norm(r1, id1), norm(r2, id2); a != b || r1.Status != r2.Status {
		t.Fatalf("NOT_FOUND bodies differ:\n %d %s\n %d %s", r1.Status, a, r2.Status, b)
	}
}
