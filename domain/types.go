package domain

import (
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/echo"
)

// APIVersion is the wire API version (RFC §11.5).
const APIVersion = "0.1"

// Scope names a capability a token can carry (SUPPLEMENT "Wire shapes").
type Scope string

// The token scopes.
const (
	ScopeMessageSend        Scope = "message.send"
	ScopeMessageRead        Scope = "message.read"
	ScopeReceiptWrite       Scope = "receipt.write"
	ScopeBlobWrite          Scope = "blob.write"
	ScopeBlobRead           Scope = "blob.read"
	ScopeMemoryRead         Scope = "memory.read"
	ScopeMemoryWrite        Scope = "memory.write"
	ScopeSubscriptionManage Scope = "subscription.manage"
	ScopeSpaceObserve       Scope = "space.observe"
)

// AllScopes lists every scope a token may carry.
func AllScopes() []Scope {
	return []Scope{ScopeMessageSend, ScopeMessageRead, ScopeReceiptWrite, ScopeBlobWrite, ScopeBlobRead,
		ScopeMemoryRead, ScopeMemoryWrite, ScopeSubscriptionManage, ScopeSpaceObserve}
}

// Permission names a grant (SUPPLEMENT §11.3).
type Permission string

// The grantable permissions.
const (
	PermMemoryRead    Permission = "memory.read"
	PermMemoryWrite   Permission = "memory.write"
	PermBlobReference Permission = "blob.reference"
	PermSpaceObserve  Permission = "space.observe"
)

// View is a consumer view (RFC §4.4).
type View string

// The consumer views.
const (
	ViewInbox    View = "inbox"
	ViewSpaceLog View = "space_log"
)

// ItemType is a feed item type (RFC §8.1).
type ItemType string

// The feed item types.
const (
	ItemMessage        ItemType = "message"
	ItemMemoryRevision ItemType = "memory_revision"
	ItemReceipt        ItemType = "receipt"
)

// Stage is a receipt stage (RFC §8.3).
type Stage string

// The receipt stages, in order.
const (
	StageNone      Stage = ""
	StageReceived  Stage = "received"
	StageProcessed Stage = "processed"
)

func (s Stage) rank() int {
	switch s {
	case StageReceived:
		return 1
	case StageProcessed:
		return 2
	default:
		return 0
	}
}

// SubmissionState is the state of an idempotent submission (RFC §6.3).
type SubmissionState string

// The submission states.
const (
	StateReserved  SubmissionState = "reserved"
	StatePrepared  SubmissionState = "prepared"
	StateCommitted SubmissionState = "committed"
	StateFailed    SubmissionState = "failed"
)

// Filter is a consumer's fixed filter (RFC §4.4). Empty lists add no restriction.
type Filter struct {
	ProducerIDs   []string `json:"producer_ids"`
	ThreadIDs     []string `json:"thread_ids"`
	ItemTypes     []string `json:"item_types"`
	CollectionIDs []string `json:"collection_ids"`
}

func normalizeSet(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// Normalize returns the filter with every list sorted and de-duplicated (never nil).
func (f Filter) Normalize() Filter {
	return Filter{
		ProducerIDs:   normalizeSet(f.ProducerIDs),
		ThreadIDs:     normalizeSet(f.ThreadIDs),
		ItemTypes:     normalizeSet(f.ItemTypes),
		CollectionIDs: normalizeSet(f.CollectionIDs),
	}
}

// Space is an isolated tenant.
type Space struct {
	SpaceID            string    `json:"space_id"`
	DisplayName        string    `json:"display_name,omitempty"`
	DefaultRecipientID string    `json:"default_recipient_id"`
	SourceURI          string    `json:"source_uri"`
	CreatedAt          time.Time `json:"created_at"`
	// RateLimits are the owner's per-credential rate limits; nil means the deployment's defaults.
	RateLimits *RateLimits `json:"rate_limits,omitempty"`
	// Quotas are the owner's capacity limits; nil means the deployment's defaults (quota.go).
	Quotas *Quotas `json:"quotas,omitempty"`
	// State is "" (active), SpaceDeleting or SpaceDeleted; Deletion describes a deletion (spacedelete.go).
	State    string         `json:"state,omitempty"`
	Deletion *SpaceDeletion `json:"deletion,omitempty"`
}

// Actor is a user, agent or client identity in a space.
type Actor struct {
	ActorID     string    `json:"actor_id"`
	SpaceID     string    `json:"space_id"`
	DisplayName string    `json:"display_name,omitempty"`
	Revoked     bool      `json:"revoked"`
	CreatedAt   time.Time `json:"created_at"`
}

// Consumer is a stable receiving identity of an actor (RFC §4.2).
type Consumer struct {
	ConsumerID   string `json:"consumer_id"`
	ActorID      string `json:"actor_id"`
	View         View   `json:"view"`
	Filter       Filter `json:"filter"`
	ViewRevision int64  `json:"view_revision"`
}

// Grant is a resource permission held by an actor.
type Grant struct {
	GrantID      string     `json:"grant_id"`
	ActorID      string     `json:"actor_id"`
	Permission   Permission `json:"permission"`
	CollectionID string     `json:"collection_id,omitempty"`
	BlobID       string     `json:"blob_id,omitempty"`
	Revoked      bool       `json:"revoked"`
}

// Collection is a memory collection (RFC §10.1).
type Collection struct {
	CollectionID    string `json:"collection_id"`
	SourceActorID   string `json:"source_actor_id"`
	Scope           string `json:"scope"`
	CurrentRevision int64  `json:"current_revision"`
}

// Token is the stored form of a bearer token: only its digest is kept.
type Token struct {
	TokenID    string     `json:"token_id"`
	SpaceID    string     `json:"space_id"`
	ActorID    string     `json:"actor_id"`
	ConsumerID string     `json:"consumer_id,omitempty"`
	Scopes     []Scope    `json:"scopes"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	Revoked    bool       `json:"revoked"`
	Digest     string     `json:"digest"`
	// OAuthClientID and OAuthGrantID name the OAuth client and the authorization (refresh family) a token
	// was issued to through the OAuth authorization server; both are empty for a token the owner minted.
	OAuthClientID string `json:"oauth_client_id,omitempty"`
	OAuthGrantID  string `json:"oauth_grant_id,omitempty"`
}

// MessageBody is the immutable body of a message.
type MessageBody struct {
	Text string `json:"text"`
}

// MessageSource carries the producer's native references (never used for authorization).
type MessageSource struct {
	NativeThreadID  string `json:"native_thread_id,omitempty"`
	NativeMessageID string `json:"native_message_id,omitempty"`
}

// Message is a published message (RFC §6.2).
type Message struct {
	MessageID       string          `json:"message_id"`
	SpaceID         string          `json:"space_id"`
	ProducerID      string          `json:"producer_id"`
	ThreadID        string          `json:"thread_id"`
	InReplyTo       *string         `json:"in_reply_to"`
	Kind            string          `json:"kind"`
	Subject         string          `json:"subject"`
	Body            MessageBody     `json:"body"`
	Source          MessageSource   `json:"source"`
	RecipientIDs    []string        `json:"recipient_ids"`
	AttachmentIDs   []string        `json:"attachment_ids"`
	Metadata        json.RawMessage `json:"metadata"`
	CommittedAt     time.Time       `json:"committed_at"`
	EnvelopeVersion int             `json:"envelope_version"`
	VisibleSeq      string          `json:"visible_seq"`
}

// FeedItem is one entry of the durable feed (RFC §8.1).
type FeedItem struct {
	ItemID          string          `json:"item_id"`
	SpaceID         string          `json:"space_id"`
	VisibleSeq      string          `json:"visible_seq"`
	ItemType        ItemType        `json:"item_type"`
	ResourceID      string          `json:"resource_id"`
	ResourceVersion int64           `json:"resource_version"`
	ProducerID      string          `json:"producer_id"`
	RecipientIDs    []string        `json:"recipient_ids"`
	ThreadID        *string         `json:"thread_id"`
	CommittedAt     time.Time       `json:"committed_at"`
	Data            json.RawMessage `json:"data"`
}

// MessageItemData is the type-specific data of a message feed item (SUPPLEMENT §8.1).
type MessageItemData struct {
	MessageID       string  `json:"message_id"`
	Kind            string  `json:"kind"`
	Subject         string  `json:"subject"`
	InReplyTo       *string `json:"in_reply_to"`
	AttachmentCount int     `json:"attachment_count"`
}

// ReceiptItemData is the type-specific data of a receipt feed item (SUPPLEMENT §8.1).
type ReceiptItemData struct {
	ConsumerID     string `json:"consumer_id"`
	AckedItemID    string `json:"acked_item_id"`
	ResourceID     string `json:"resource_id"`
	Stage          Stage  `json:"stage"`
	ReceiptVersion int64  `json:"receipt_version"`
}

// MemoryRevisionItemData is the type-specific data of a memory revision feed item (SUPPLEMENT §8.1).
type MemoryRevisionItemData struct {
	CollectionID  string `json:"collection_id"`
	SourceActorID string `json:"source_actor_id"`
	Revision      int64  `json:"revision"`
	Mode          string `json:"mode"`
	Upserted      int    `json:"upserted"`
	Deleted       int    `json:"deleted"`
}

// Submission is the stored idempotency record of a write (RFC §6.3).
type Submission struct {
	Operation   string          `json:"operation"`
	RequestID   string          `json:"request_id"`
	Fingerprint string          `json:"fingerprint"`
	ResourceID  string          `json:"resource_id"`
	State       SubmissionState `json:"state"`
	ReservedAt  time.Time       `json:"reserved_at"`
	// Fixed holds values fixed at reservation (resolved defaults such as thread_id).
	Fixed  json.RawMessage `json:"fixed,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *WireError      `json:"error,omitempty"`
}

// WireError is the public error object of the RFC §5.2 envelope.
type WireError struct {
	Code      Code           `json:"code"`
	Message   string         `json:"message"`
	Retryable bool           `json:"retryable"`
	Details   map[string]any `json:"details"`
}

// Wire returns the public error object of e.
// Wire returns the error as the client sees it. A string detail never repeats more than the first 100
// bytes of a caller's value.
func (e *Error) Wire() WireError {
	d := make(map[string]any, len(e.Details))
	for k, v := range e.Details {
		if s, ok := v.(string); ok {
			v = echo.Clip(s)
		}
		d[k] = v
	}
	return WireError{Code: e.Code, Message: e.Message, Retryable: e.Code.Retryable(), Details: d}
}

func isUnavailable(err error) bool { return errors.Is(err, port.ErrUnavailable) }
