// Package wire holds the black-box wire shapes the end-to-end tests decode Waypost's JSON answers into.
//
// The shapes are written from the RFC, not from the domain types: identifiers, times, stages and item types
// are plain strings and opaque parts stay raw JSON, so a test decoding the wire checks what the wire says and
// not what the Go types that produced it would read back. They decode loosely (unknown members are ignored);
// the JSON schemas check the answers strictly.
package wire

import (
	"encoding/json"
	"testing"
)

// Error is the error object of the RFC §5.2 envelope.
type Error struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Retryable bool           `json:"retryable"`
	Details   map[string]any `json:"details"`
}

// Envelope is the RFC §5.2 result envelope, with its data left raw.
type Envelope struct {
	OK        bool            `json:"ok"`
	RequestID string          `json:"request_id"`
	Data      json.RawMessage `json:"data"`
	Error     *Error          `json:"error"`
}

// Space is the data of a created space.
type Space struct {
	SpaceID            string `json:"space_id"`
	DefaultRecipientID string `json:"default_recipient_id"`
	SourceURI          string `json:"source_uri"`
}

// Actor is the data of a created actor.
type Actor struct {
	ActorID string `json:"actor_id"`
}

// Consumer is the data of a created or changed consumer.
type Consumer struct {
	ConsumerID   string `json:"consumer_id"`
	ViewRevision int64  `json:"view_revision"`
}

// Token is the data of an issued token.
type Token struct {
	TokenID   string  `json:"token_id"`
	Token     string  `json:"token"`
	ExpiresAt *string `json:"expires_at"`
}

// Send is the data of message.send.
type Send struct {
	SubmissionState string `json:"submission_state"`
	ResourceID      string `json:"resource_id"`
	ThreadID        string `json:"thread_id"`
	CommittedAt     string `json:"committed_at"`
	VisibleSeq      string `json:"visible_seq"`
}

// FeedItem is one item of a consumer's feed.
type FeedItem struct {
	ItemID          string          `json:"item_id"`
	SpaceID         string          `json:"space_id"`
	VisibleSeq      string          `json:"visible_seq"`
	ItemType        string          `json:"item_type"`
	ResourceID      string          `json:"resource_id"`
	ResourceVersion int64           `json:"resource_version"`
	ProducerID      string          `json:"producer_id"`
	RecipientIDs    []string        `json:"recipient_ids"`
	ThreadID        *string         `json:"thread_id"`
	CommittedAt     string          `json:"committed_at"`
	Data            json.RawMessage `json:"data"`
}

// PageHead is the part of a feed page besides its items.
type PageHead struct {
	NextCursor       string  `json:"next_cursor"`
	HasMore          bool    `json:"has_more"`
	CheckpointCursor *string `json:"checkpoint_cursor"`
}

// Page is one page of a consumer's feed, its items decoded.
type Page struct {
	Items []FeedItem `json:"items"`
	PageHead
}

// RawPage is one page of a consumer's feed with its items left raw, for tests that compare items byte for
// byte.
type RawPage struct {
	Items []json.RawMessage `json:"items"`
	PageHead
}

// Feed decodes the items of a page, failing t on an item that does not decode.
func (p RawPage) Feed(t testing.TB) []FeedItem {
	t.Helper()
	out := make([]FeedItem, len(p.Items))
	for i, raw := range p.Items {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			t.Fatalf("decoding item %s: %v", raw, err)
		}
	}
	return out
}

// AckReceipt reports the stage of one acked item.
type AckReceipt struct {
	ItemID  string `json:"item_id"`
	Stage   string `json:"stage"`
	Changed bool   `json:"changed"`
}

// Ack is the data of inbox.ack.
type Ack struct {
	Receipts         []AckReceipt `json:"receipts"`
	CheckpointCursor *string      `json:"checkpoint_cursor"`
}

// Message is the data of message.get.
type Message struct {
	MessageID  string  `json:"message_id"`
	SpaceID    string  `json:"space_id"`
	ProducerID string  `json:"producer_id"`
	ThreadID   string  `json:"thread_id"`
	InReplyTo  *string `json:"in_reply_to"`
	Kind       string  `json:"kind"`
	Subject    string  `json:"subject"`
	Body       struct {
		Text string `json:"text"`
	} `json:"body"`
	RecipientIDs    []string        `json:"recipient_ids"`
	AttachmentIDs   []string        `json:"attachment_ids"`
	Metadata        json.RawMessage `json:"metadata"`
	CommittedAt     string          `json:"committed_at"`
	EnvelopeVersion int             `json:"envelope_version"`
}

// Status is the data of a submission status lookup.
type Status struct {
	SubmissionState string          `json:"submission_state"`
	ResourceID      string          `json:"resource_id"`
	Result          json.RawMessage `json:"result"`
}

// Subscription is the data of a webhook subscription.
type Subscription struct {
	SubscriptionID string `json:"subscription_id"`
	State          string `json:"state"`
	ConsumerID     string `json:"consumer_id"`
	ExpiresAt      string `json:"expires_at"`
	RefreshBefore  string `json:"refresh_before"`
	Delivery       struct {
		Mode string `json:"mode"`
		URL  string `json:"url"`
	} `json:"delivery"`
	Health *struct {
		LastSuccessAt       *string `json:"last_success_at"`
		LastFailureAt       *string `json:"last_failure_at"`
		LastFailureReason   *string `json:"last_failure_reason"`
		ConsecutiveFailures int     `json:"consecutive_failures"`
	} `json:"health"`
}

// Attempt is one logged attempt of a webhook delivery.
type Attempt struct {
	AttemptID  string `json:"attempt_id"`
	StatusCode int    `json:"status_code"`
	Outcome    string `json:"outcome"`
}

// Delivery is the data of one webhook delivery.
type Delivery struct {
	DeliveryID    string    `json:"delivery_id"`
	EventID       string    `json:"event_id"`
	State         string    `json:"state"`
	Attempts      int       `json:"attempts"`
	FailureReason string    `json:"failure_reason"`
	Log           []Attempt `json:"attempts_log"`
}

// CloudEvent is the structured-mode CloudEvent a webhook delivery carries, its data left raw.
type CloudEvent struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Subject         string          `json:"subject"`
	Time            string          `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	Data            json.RawMessage `json:"data"`
}
