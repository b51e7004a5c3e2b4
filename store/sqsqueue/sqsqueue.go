// Package sqsqueue is the port.DeliveryQueue on Amazon SQS: the wake-ups of webhook delivery attempts that
// the AWS deliverer function receives.
//
// # Messages
//
// Each Enqueue sends one message to a standard queue. Its body is the JSON of the port.DeliveryRef,
//
//	{"space_id":"spc_…","delivery_id":"dl_…"}
//
// and nothing else: the delivery record in the table is the truth, the message only says "look at this one
// now". The message is delayed until the attempt is due: DelaySeconds is the time to notBefore rounded up
// to a whole second, so a wake-up never arrives before its attempt is due, and clamped to 0…900 s (SQS's
// limit). A later attempt is woken at most 15 minutes early; the deliverer then finds it "not yet due" and
// queues it again, up to 900 s at a time.
//
// Duplicates and losses are both harmless: attempts are claimed in the table (two wake-ups of one delivery
// make one attempt), and a lost wake-up leaves the delivery in the table's due index, which the deliverer's
// scheduled sweep re-queues.
package sqsqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/waypost/waypost/domain/port"
)

// MaxDelay is the longest delay SQS accepts on a message (DelaySeconds ≤ 900).
const MaxDelay = 900 * time.Second

// API is the part of the SQS client the queue uses; *sqs.Client implements it.
type API interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Options tune a Queue. The zero value is usable.
type Options struct {
	// Now is the clock delays are computed with; nil means time.Now.
	Now func() time.Time
}

// Queue is a port.DeliveryQueue on one SQS queue. It is safe for concurrent use.
type Queue struct {
	api API
	url string
	now func() time.Time
}

var _ port.DeliveryQueue = (*Queue)(nil)

// New returns a queue sending to the SQS queue at queueURL.
func New(api API, queueURL string, opts Options) (*Queue, error) {
	if api == nil {
		return nil, errors.New("sqsqueue: nil client")
	}
	if queueURL == "" {
		return nil, errors.New("sqsqueue: empty queue URL")
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Queue{api: api, url: queueURL, now: now}, nil
}

// URL returns the queue URL.
func (q *Queue) URL() string { return q.url }

// Delay returns the DelaySeconds of a wake-up at notBefore seen at now: the wait rounded up to whole
// seconds, clamped to 0…900.
func Delay(notBefore, now time.Time) int32 {
	d := notBefore.Sub(now)
	if d <= 0 {
		return 0
	}
	if d >= MaxDelay {
		return int32(MaxDelay / time.Second)
	}
	return int32(math.Ceil(d.Seconds()))
}

// Enqueue sends the wake-up of ref, delayed until notBefore (at most MaxDelay ahead).
func (q *Queue) Enqueue(ctx context.Context, ref port.DeliveryRef, notBefore time.Time) error {
	body, err := EncodeMessage(ref)
	if err != nil {
		return err
	}
	_, err = q.api.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     aws.String(q.url),
		MessageBody:  aws.String(body),
		DelaySeconds: Delay(notBefore, q.now()),
	})
	if err != nil {
		return fmt.Errorf("sqsqueue: sending the wake-up of delivery %s: %w", ref.DeliveryID, err)
	}
	return nil
}

// EncodeMessage returns the message body of ref.
func EncodeMessage(ref port.DeliveryRef) (string, error) {
	if ref.SpaceID == "" || ref.DeliveryID == "" {
		return "", fmt.Errorf("sqsqueue: incomplete delivery reference %+v", ref)
	}
	b, err := json.Marshal(ref)
	if err != nil {
		return "", fmt.Errorf("sqsqueue: encoding a delivery reference: %w", err)
	}
	return string(b), nil
}

// DecodeMessage returns the delivery reference of a message body written by EncodeMessage. Unknown members,
// trailing data and missing IDs are errors.
func DecodeMessage(body string) (port.DeliveryRef, error) {
	var ref port.DeliveryRef
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ref); err != nil {
		return port.DeliveryRef{}, fmt.Errorf("sqsqueue: not a delivery wake-up: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return port.DeliveryRef{}, errors.New("sqsqueue: not a delivery wake-up: trailing data")
	}
	if ref.SpaceID == "" || ref.DeliveryID == "" {
		return port.DeliveryRef{}, errors.New("sqsqueue: not a delivery wake-up: space_id and delivery_id are required")
	}
	return ref, nil
}

// ClientOptions returns the SQS client options for endpoint: the default AWS endpoint when it is "", or an
// emulator's URL.
func ClientOptions(endpoint string) func(*sqs.Options) {
	return func(o *sqs.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}
}
