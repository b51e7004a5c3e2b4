package sqsqueue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/sqsqueue"
	"github.com/waypost/waypost/store/sqsqueue/sqstest"
)

func TestMain(m *testing.M) { sqstest.Main(m) }

func TestDelay(t *testing.T) {
	now := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		wait time.Duration
		want int32
	}{
		{-time.Hour, 0}, {-time.Nanosecond, 0}, {0, 0}, {time.Nanosecond, 1}, {900 * time.Millisecond, 1},
		{time.Second, 1}, {1100 * time.Millisecond, 2}, {30 * time.Second, 30}, {899*time.Second + 1, 900},
		{900 * time.Second, 900}, {901 * time.Second, 900}, {7 * 24 * time.Hour, 900},
	} {
		if got := sqsqueue.Delay(now.Add(c.wait), now); got != c.want {
			t.Errorf("Delay(now+%v) = %d, want %d", c.wait, got, c.want)
		}
	}
}

func TestMessageCodec(t *testing.T) {
	ref := port.DeliveryRef{SpaceID: "spc_1", DeliveryID: "dl_2"}
	body, err := sqsqueue.EncodeMessage(ref)
	if err != nil || body != `{"space_id":"spc_1","delivery_id":"dl_2"}` {
		t.Fatalf("EncodeMessage = %s, %v", body, err)
	}
	if got, err := sqsqueue.DecodeMessage(body); err != nil || got != ref {
		t.Fatalf("DecodeMessage(%s) = %+v, %v", body, got, err)
	}
	for _, bad := range []string{"", "null", "{}", `{"space_id":"spc_1"}`, `{"delivery_id":"dl_2"}`,
		`{"space_id":"spc_1","delivery_id":"dl_2","x":1}`, `{"space_id":"spc_1","delivery_id":"dl_2"} {}`,
		`{"space_id":"spc_1","delivery_id":"dl_2"}]`, `[1]`, `{"space_id":1,"delivery_id":"dl_2"}`} {
		if got, err := sqsqueue.DecodeMessage(bad); err == nil {
			t.Errorf("DecodeMessage(%q) = %+v, want an error", bad, got)
		}
	}
	if _, err := sqsqueue.EncodeMessage(port.DeliveryRef{SpaceID: "spc_1"}); err == nil {
		t.Fatal("EncodeMessage of a reference without delivery ID succeeded")
	}
	if _, err := sqsqueue.New(nil, "u", sqsqueue.Options{}); err == nil {
		t.Fatal("New without a client succeeded")
	}
}

func client(endpoint string) *sqs.Client {
	return sqs.New(sqs.Options{Region: sqstest.Region, Credentials: credentials.NewStaticCredentialsProvider(sqstest.AccessKey, sqstest.SecretKey, "")},
		sqsqueue.ClientOptions(endpoint))
}

// receive long-polls the queue for up to wait and returns (and deletes) what arrived.
func receive(t *testing.T, c *sqs.Client, queueURL string, wait int32) []string {
	t.Helper()
	out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: wait})
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	var bodies []string
	for _, m := range out.Messages {
		bodies = append(bodies, aws.ToString(m.Body))
		if _, err := c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatalf("DeleteMessage: %v", err)
		}
	}
	return bodies
}

// Enqueue against goaws: the body is the reference's JSON, a due wake-up is visible at once, a later one
// only after its delay (rounded up to whole seconds), and a far one is sent with the 900 s maximum.
func TestEnqueueOnEmulator(t *testing.T) {
	e := sqstest.Require(t)
	queueURL := e.Queue(t)
	rec := sqstest.NewRecorder(t, e.Endpoint)
	c := client(rec.URL)
	now := time.Now()
	clock := func() time.Time { return now }
	q, err := sqsqueue.New(c, queueURL, sqsqueue.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	due := port.DeliveryRef{SpaceID: "spc_due", DeliveryID: "dl_due"}
	if err := q.Enqueue(ctx, due, now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	sends := rec.Take()
	if len(sends) != 1 || sends[0]["QueueUrl"] != queueURL || sends[0]["MessageBody"] != `{"space_id":"spc_due","delivery_id":"dl_due"}` {
		t.Fatalf("SendMessage requests: %v", sends)
	}
	if d, ok := sends[0]["DelaySeconds"]; ok && d != float64(0) {
		t.Fatalf("a due wake-up was sent with DelaySeconds %v", d)
	}
	got := receive(t, c, queueURL, 2)
	if len(got) != 1 {
		t.Fatalf("received %q, want the due wake-up", got)
	}
	if ref, err := sqsqueue.DecodeMessage(got[0]); err != nil || ref != due {
		t.Fatalf("received %q → %+v, %v", got[0], ref, err)
	}

	// 1.5 s ahead: DelaySeconds 2; not visible at once, visible within a few seconds, not before ~2 s.
	later := port.DeliveryRef{SpaceID: "spc_later", DeliveryID: "dl_later"}
	sent := time.Now()
	if err := q.Enqueue(ctx, later, now.Add(1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if sends := rec.Take(); len(sends) != 1 || sends[0]["DelaySeconds"] != float64(2) {
		t.Fatalf("SendMessage requests: %v, want DelaySeconds 2", sends)
	}
	arrived := receive(t, c, queueURL, 0)
	if len(arrived) != 0 && time.Since(sent) < 1900*time.Millisecond {
		t.Fatalf("a wake-up delayed by 2 s was visible after %v: %q", time.Since(sent), arrived)
	}
	for time.Since(sent) < 8*time.Second && len(arrived) == 0 {
		arrived = receive(t, c, queueURL, 1)
	}
	elapsed := time.Since(sent)
	if len(arrived) != 1 || arrived[0] != `{"space_id":"spc_later","delivery_id":"dl_later"}` {
		t.Fatalf("after %v received %q", elapsed, arrived)
	}
	if elapsed < 1900*time.Millisecond {
		t.Fatalf("a wake-up delayed by 2 s arrived after %v", elapsed)
	}
	t.Logf("a 2 s wake-up arrived after %v", elapsed.Round(time.Millisecond))

	// Past SQS's limit: sent with 900 s (and accepted); it is not visible now.
	if err := q.Enqueue(ctx, port.DeliveryRef{SpaceID: "spc_far", DeliveryID: "dl_far"}, now.Add(6*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if sends := rec.Take(); len(sends) != 1 || sends[0]["DelaySeconds"] != float64(900) {
		t.Fatalf("SendMessage requests: %v, want DelaySeconds 900", sends)
	}
	if got := receive(t, c, queueURL, 0); len(got) != 0 {
		t.Fatalf("a wake-up delayed by 900 s was visible: %q", got)
	}

	// An unreachable queue is an error naming the delivery, never a panic or a silent success.
	bad, err := sqsqueue.New(c, strings.TrimSuffix(queueURL, "/")+"-missing", sqsqueue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Enqueue(ctx, due, now); err == nil || !strings.Contains(err.Error(), "dl_due") {
		t.Fatalf("Enqueue to a missing queue: %v", err)
	}
}
