package functions_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/waypost/waypost/e2e/wire"
	"github.com/waypost/waypost/functions/config"
	"github.com/waypost/waypost/internal/syncbuf"
	"github.com/waypost/waypost/store/sqsqueue"
	"github.com/waypost/waypost/store/sqsqueue/sqstest"
)

// The receiver's secret: "whsec_" + base64 of 32 bytes.
const webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw+VrGMs0gqmc="

// hook is one request the receiver accepted (its signature verified).
type hook struct {
	id, contentType string
	body            []byte
}

// receiver is a webhook receiver on loopback (plain HTTP: the functions run with the tests-only
// WAYPOST_WEBHOOK_ALLOW_LOOPBACK). Every request's signature is checked twice, by code this project did not
// write (the Standard Webhooks Go library) and by the algorithm computed here from the specification; a
// request that fails either is answered 401 and recorded as bad. Challenges are answered; events are
// answered with status.
type receiver struct {
	srv        *httptest.Server
	status     atomic.Int64
	mu         sync.Mutex
	challenges int
	events     syncbuf.List[hook]
	bad        []string
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(webhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(webhookSecret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{}
	r.status.Store(http.StatusOK)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		if err := wh.Verify(body, req.Header); err != nil || !specSignatureOK(key, req.Header, body) {
			r.mu.Lock()
			r.bad = append(r.bad, fmt.Sprintf("%s: library %v, spec %v", req.Header.Get("webhook-id"), err, specSignatureOK(key, req.Header, body)))
			r.mu.Unlock()
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var probe struct {
			Type      string `json:"type"`
			Challenge string `json:"challenge"`
		}
		_ = json.Unmarshal(body, &probe)
		r.mu.Lock()
		defer r.mu.Unlock()
		if probe.Type == "verification" {
			r.challenges++
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"challenge": probe.Challenge})
			return
		}
		r.events.Add(hook{id: req.Header.Get("webhook-id"), contentType: req.Header.Get("Content-Type"), body: body})
		w.WriteHeader(int(r.status.Load()))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// specSignatureOK checks the webhook-signature header as the Standard Webhooks specification defines it:
// some "v1,<base64>" entry equals base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)).
func specSignatureOK(key []byte, h http.Header, body []byte) bool {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(h.Get("webhook-id") + "." + h.Get("webhook-timestamp") + "."))
	mac.Write(body)
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		if v, s, ok := strings.Cut(sig, ","); ok && v == "v1" && hmac.Equal([]byte(s), []byte(want)) {
			return true
		}
	}
	return false
}

// queue is the test's own view of the delivery queue: it plays Lambda's SQS event source mapping.
type queue struct {
	c   *sqs.Client
	url string
}

// receive returns the messages that become visible within wait (at least one poll).
func (q queue) receive(t *testing.T, wait time.Duration) []events.SQSMessage {
	t.Helper()
	var out []events.SQSMessage
	deadline := time.Now().Add(wait)
	for {
		secs := int32(0)
		if rest := time.Until(deadline); rest >= time.Second {
			secs = 1
		}
		res, err := q.c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.url), MaxNumberOfMessages: 10, WaitTimeSeconds: secs})
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		for _, m := range res.Messages {
			out = append(out, events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
				Body: aws.ToString(m.Body), Md5OfBody: aws.ToString(m.MD5OfBody), EventSource: "aws:sqs",
				EventSourceARN: "arn:aws:sqs:us-east-1:" + sqstest.AccountID + ":deliveries", AWSRegion: "us-east-1"})
		}
		if len(out) > 0 || !time.Now().Before(deadline) {
			return out
		}
	}
}

// deliver invokes the deliverer with msgs as one SQS batch and, as the event source mapping does, deletes
// the messages it did not report as failures. It returns the failed message IDs.
func (q queue) deliver(t *testing.T, deliverer *lambdaFn, msgs []events.SQSMessage) []string {
	t.Helper()
	payload, err := json.Marshal(events.SQSEvent{Records: msgs})
	if err != nil {
		t.Fatal(err)
	}
	raw := deliverer.invokeRaw(t, payload)
	var resp events.SQSEventResponse
	if err := json.Unmarshal(raw, &resp); err != nil || bytes.Contains(raw, []byte(`"errorMessage"`)) {
		t.Fatalf("deliverer answered %s (%v)", raw, err)
	}
	failed := map[string]bool{}
	var ids []string
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
		ids = append(ids, f.ItemIdentifier)
	}
	for _, m := range msgs {
		if !failed[m.MessageId] {
			if _, err := q.c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(q.url), ReceiptHandle: aws.String(m.ReceiptHandle)}); err != nil {
				t.Fatalf("DeleteMessage: %v", err)
			}
		}
	}
	return ids
}

// dispatch invokes the dispatcher with ev and fails the test unless every record went through.
func dispatch(t *testing.T, dispatcher *lambdaFn, ev events.DynamoDBEvent) {
	t.Helper()
	if len(ev.Records) == 0 {
		t.Fatal("no stream records to dispatch")
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	raw := dispatcher.invokeRaw(t, payload)
	var resp events.DynamoDBEventResponse
	if err := json.Unmarshal(raw, &resp); err != nil || len(resp.BatchItemFailures) != 0 || bytes.Contains(raw, []byte(`"errorMessage"`)) {
		t.Fatalf("dispatcher answered %s (%v)", raw, err)
	}
}

// TestLambdaWebhookDelivery runs the AWS webhook path through the real bootstrap binaries of the admin,
// mailbox, dispatcher and deliverer functions, each under its own aws-lambda-rie (invoked one at a time),
// with DynamoDB = minidyn served on loopback by this process, S3 = versitygw and SQS = goaws v0.5.4.
//
// minidyn has no DynamoDB Streams. The table's stream is SIMULATED (dynamotest.Stream): after each write
// the test scans the table and wraps every new or changed item as an INSERT or MODIFY record with its
// NEW_IMAGE, in the JSON Lambda delivers, and invokes the dispatcher binary with that event. What the
// dispatcher receives is therefore the images of the real committed items, but not a real stream's
// ordering or batching. The test itself plays the SQS event source mapping: it receives from goaws,
// invokes the deliverer with an SQS event of those messages, and deletes the ones not reported as failed.
func TestLambdaWebhookDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the Lambda bootstraps; skipped in -short mode")
	}
	sqsEnv := sqstest.Require(t)
	queueURL := sqsEnv.Queue(t)
	q := queue{c: sqsEnv.Client(), url: queueURL}
	sends := sqstest.NewRecorder(t, sqsEnv.Endpoint)
	recv := newReceiver(t)
	e := newLambdaEnv(t, map[string]string{config.EnvDeliveryQueueURL: queueURL, config.EnvSQSEndpoint: sends.URL, config.EnvWebhookAllowLoopback: "1"})
	names := []string{"admin", "mailbox", "dispatcher", "deliverer"}
	fn := e.start(t, buildFunctions(t, names...), names...)
	admin, mailbox, dispatcher, deliverer := fn["admin"], fn["mailbox"], fn["dispatcher"], fn["deliverer"]

	// Control plane: a space, A (sender) and B (subscriber with an inbox consumer).
	sp, _ := okData[wire.Space](t, admin, "POST", "/admin/v0/spaces", adminSecret, map[string]any{"request_id": "space-1", "display_name": "hooks"})
	if !strings.HasPrefix(sp.SourceURI, "urn:uuid:") {
		t.Fatalf("space: %+v", sp)
	}
	n := 0
	rid := func(p string) string { n++; return fmt.Sprintf("%s-%d", p, n) }
	a := newParty(t, admin, sp.SpaceID, "agent A", rid, "message.send", "message.read")
	b := newParty(t, admin, sp.SpaceID, "client B", rid, "message.read", "subscription.manage")

	// B subscribes through the mailbox function: the challenge reaches the receiver and is answered.
	sub, _ := okData[struct {
		SubscriptionID string `json:"subscription_id"`
		State          string `json:"state"`
		Delivery       struct {
			URL string `json:"url"`
		} `json:"delivery"`
	}](t, mailbox, "POST", "/v0/subscriptions", b.token, map[string]any{"request_id": "sub-1", "consumer_id": b.consumer,
		"event_types": []string{"waypost.message.committed.v1"},
		"delivery":    map[string]any{"mode": "webhook", "url": recv.srv.URL + "/hook", "secret": webhookSecret}})
	if sub.State != "active" || recv.challenges != 1 {
		t.Fatalf("subscription %+v after %d challenges", sub, recv.challenges)
	}
	stream := e.ddb.Stream(t, e.table) // from here on, every write reaches the dispatcher

	send := func(text string) wire.Send {
		t.Helper()
		s, _ := okData[wire.Send](t, mailbox, "POST", "/v0/messages", a.token, map[string]any{"request_id": rid("send"),
			"recipient_ids": []string{b.actor}, "kind": "result", "subject": "s", "body": map[string]any{"text": text}})
		return s
	}
	itemOf := func(s wire.Send) wire.FeedItem {
		t.Helper()
		pg, _ := okData[wire.Page](t, mailbox, "POST", "/v0/inbox/read", b.token, map[string]any{"consumer_id": b.consumer, "cursor": nil, "limit": 50})
		for _, it := range pg.Items {
			if it.ResourceID == s.ResourceID {
				return it
			}
		}
		t.Fatalf("message %s not in B's inbox: %+v", s.ResourceID, pg.Items)
		return wire.FeedItem{}
	}

	// 1. A message commits; its stream records go to the dispatcher, which queues one wake-up.
	sent := send("the secret text of message one")
	first := stream.Next(t)
	dispatch(t, dispatcher, first)
	if s := sends.Take(); len(s) != 1 || s[0]["QueueUrl"] != queueURL {
		t.Fatalf("the dispatcher's SendMessage calls: %v", s)
	}
	msgs := q.receive(t, 3*time.Second)
	if len(msgs) != 1 {
		t.Fatalf("%d messages on the queue after one commit", len(msgs))
	}
	ref, err := sqsqueue.DecodeMessage(msgs[0].Body)
	if err != nil || ref.SpaceID != sp.SpaceID {
		t.Fatalf("wake-up %q: %+v, %v", msgs[0].Body, ref, err)
	}
	// Dispatching the same records again (a retried stream batch) queues nothing.
	dispatch(t, dispatcher, first)
	if s := sends.Take(); len(s) != 0 {
		t.Fatalf("a repeated stream batch was queued again: %v", s)
	}

	// 2. The deliverer sends it: exactly one signed CloudEvent, id = the feed item_id, source = the space's
	// source_uri, and no message content.
	if failed := q.deliver(t, deliverer, msgs); len(failed) != 0 {
		t.Fatalf("deliverer failures: %q", failed)
	}
	item := itemOf(sent)
	got := recv.events.Take()
	if len(got) != 1 || got[0].id != item.ItemID || got[0].contentType != "application/cloudevents+json" {
		t.Fatalf("receiver got %+v, want one event %s", got, item.ItemID)
	}
	var ce wire.CloudEvent
	if err := json.Unmarshal(got[0].body, &ce); err != nil {
		t.Fatal(err)
	}
	var data map[string]any
	if err := json.Unmarshal(ce.Data, &data); err != nil {
		t.Fatal(err)
	}
	if ce.SpecVersion != "1.0" || ce.ID != item.ItemID || ce.Source != sp.SourceURI || ce.Type != "waypost.message.committed.v1" ||
		ce.Subject != "messages/"+sent.ResourceID || ce.DataContentType != "application/json" ||
		data["message_id"] != sent.ResourceID || data["visible_seq"] != sent.VisibleSeq || bytes.Contains(got[0].body, []byte("secret text")) {
		t.Fatalf("event %s", got[0].body)
	}
	if s := sends.Take(); len(s) != 0 {
		t.Fatalf("a delivered event was queued again: %v", s)
	}

	// 3. The receiver fails (500): the deliverer reports success for the message, queues the retry with
	// DelaySeconds 1 (the first retry is due 1 s ± 10% later, rounded up), and the admin plane lists it as
	// pending with one attempt.
	recv.status.Store(http.StatusInternalServerError)
	second := send("message two")
	dispatch(t, dispatcher, stream.Next(t))
	sends.Take()
	msgs = q.receive(t, 3*time.Second)
	if len(msgs) != 1 {
		t.Fatalf("%d messages after the second commit", len(msgs))
	}
	if failed := q.deliver(t, deliverer, msgs); len(failed) != 0 {
		t.Fatalf("deliverer failures: %q", failed)
	}
	s, sentAt := sends.TakeTimed()
	// 1 s ± 10% from the end of the attempt, rounded up to whole seconds: 1, or 2 when the jitter went
	// past the next second.
	if len(s) != 1 || (s[0]["DelaySeconds"] != float64(1) && s[0]["DelaySeconds"] != float64(2)) || s[0]["MessageBody"] != msgs[0].Body {
		t.Fatalf("the deliverer's SendMessage calls after a 500: %v, want one with DelaySeconds 1 (or 2) and the same body", s)
	}
	delay := time.Duration(s[0]["DelaySeconds"].(float64)) * time.Second
	t.Logf("first retry queued with DelaySeconds %v", s[0]["DelaySeconds"])
	// The wake-up is not visible before its delay (checked only while that is still meaningful: the
	// invocations below may take long on a loaded machine).
	if early := q.receive(t, 0); len(early) != 0 && time.Since(sentAt[0]) < delay-100*time.Millisecond {
		t.Fatalf("the retry's wake-up was visible %v after it was sent", time.Since(sentAt[0]))
	} else if len(early) != 0 {
		msgs = early
	} else {
		msgs = nil
	}
	secondItem := itemOf(second)
	if got := recv.events.Take(); len(got) != 1 || got[0].id != secondItem.ItemID {
		t.Fatalf("receiver got %+v", got)
	}
	pending, _ := okData[struct {
		Deliveries []wire.Delivery `json:"deliveries"`
	}](t, admin, "GET", "/admin/v0/spaces/"+sp.SpaceID+"/deliveries?state=pending", adminSecret, nil)
	if len(pending.Deliveries) != 1 || pending.Deliveries[0].EventID != secondItem.ItemID || pending.Deliveries[0].Attempts != 1 ||
		len(pending.Deliveries[0].Log) != 1 || pending.Deliveries[0].Log[0].StatusCode != 500 {
		t.Fatalf("pending deliveries: %+v", pending)
	}
	if msgs == nil {
		msgs = q.receive(t, 5*time.Second)
	}
	if len(msgs) != 1 || msgs[0].Body != s[0]["MessageBody"] {
		t.Fatalf("retry wake-up: %+v", msgs)
	}
	if waited := time.Since(sentAt[0]); waited < delay-100*time.Millisecond {
		t.Fatalf("a wake-up delayed by %v arrived after %v", delay, waited)
	}

	// 4. The receiver now answers 410 Gone: no further attempt; the admin plane lists a failed record.
	recv.status.Store(http.StatusGone)
	if failed := q.deliver(t, deliverer, msgs); len(failed) != 0 {
		t.Fatalf("deliverer failures: %q", failed)
	}
	if got := recv.events.Take(); len(got) != 1 || got[0].id != secondItem.ItemID {
		t.Fatalf("receiver got %+v", got)
	}
	if s := sends.Take(); len(s) != 0 {
		t.Fatalf("a given-up delivery was queued again: %v", s)
	}
	failedList, _ := okData[struct {
		Deliveries []wire.Delivery `json:"deliveries"`
	}](t, admin, "GET", "/admin/v0/spaces/"+sp.SpaceID+"/deliveries?state=failed", adminSecret, nil)
	secondRef, err := sqsqueue.DecodeMessage(msgs[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(failedList.Deliveries) != 1 || failedList.Deliveries[0].DeliveryID != secondRef.DeliveryID ||
		failedList.Deliveries[0].Attempts != 2 || failedList.Deliveries[0].Log[1].StatusCode != 410 ||
		failedList.Deliveries[0].Log[0].AttemptID == failedList.Deliveries[0].Log[1].AttemptID {
		t.Fatalf("failed deliveries: %+v", failedList)
	}

	// 5. An operator redelivers through the admin function, whose delivery queue wakes the deliverer; the
	// receiver is back and gets the same event (same webhook-id), signed anew.
	recv.status.Store(http.StatusOK)
	okData[wire.Delivery](t, admin, "POST", "/admin/v0/spaces/"+sp.SpaceID+"/deliveries/"+failedList.Deliveries[0].DeliveryID+"/redeliver",
		adminSecret, map[string]any{"request_id": "redeliver-1"})
	if s := sends.Take(); len(s) != 1 || s[0]["MessageBody"] != msgs[0].Body {
		t.Fatalf("the admin function's SendMessage calls: %v", s)
	}
	msgs = q.receive(t, 3*time.Second)
	if failed := q.deliver(t, deliverer, msgs); len(msgs) != 1 || len(failed) != 0 {
		t.Fatalf("redelivery: %d messages, failures %q", len(msgs), failed)
	}
	if got := recv.events.Take(); len(got) != 1 || got[0].id != secondItem.ItemID {
		t.Fatalf("receiver got %+v after the redelivery", got)
	}

	// 6. A lost wake-up: the dispatcher's message is dropped; the scheduled invocation of the deliverer
	// finds the delivery in the due index and queues it again.
	third := send("message three")
	dispatch(t, dispatcher, stream.Next(t))
	sends.Take()
	lost := q.receive(t, 3*time.Second)
	if len(lost) != 1 {
		t.Fatalf("%d messages after the third commit", len(lost))
	}
	if _, err := q.c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: aws.String(lost[0].ReceiptHandle)}); err != nil {
		t.Fatal(err)
	}
	sched, err := json.Marshal(map[string]any{"version": "0", "id": "e2e-schedule", "detail-type": "Scheduled Event", "source": "aws.events",
		"account": "123456789012", "time": time.Now().UTC().Format(time.RFC3339), "region": "us-east-1",
		"resources": []string{"arn:aws:events:us-east-1:123456789012:rule/waypost-due-deliveries"}, "detail": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	var sweep struct {
		Due, Requeued int
	}
	if raw := deliverer.invokeRaw(t, sched); json.Unmarshal(raw, &sweep) != nil || sweep.Due != 1 || sweep.Requeued != 1 {
		t.Fatalf("scheduled deliverer: %s", raw)
	}
	msgs = q.receive(t, 3*time.Second)
	if failed := q.deliver(t, deliverer, msgs); len(msgs) != 1 || len(failed) != 0 {
		t.Fatalf("after the sweep: %d messages, failures %q", len(msgs), failed)
	}
	if got := recv.events.Take(); len(got) != 1 || got[0].id != itemOf(third).ItemID {
		t.Fatalf("receiver got %+v after the sweep", got)
	}

	// Nothing is left anywhere; no request failed its signature checks; the functions that send webhooks
	// warned about the tests-only switch.
	if rest := q.receive(t, 0); len(rest) != 0 {
		t.Fatalf("messages left on the queue: %+v", rest)
	}
	recv.mu.Lock()
	bad := recv.bad
	recv.mu.Unlock()
	if len(bad) != 0 {
		t.Fatalf("requests with bad signatures: %q", bad)
	}
	for _, f := range []*lambdaFn{mailbox, dispatcher, deliverer} {
		if !strings.Contains(f.logs.String(), config.EnvWebhookAllowLoopback+" is set") {
			t.Errorf("%s did not warn about %s:\n%s", f.name, config.EnvWebhookAllowLoopback, f.logs.String())
		}
	}
}
