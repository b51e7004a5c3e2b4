// Package event builds the CloudEvents 1.0 notifications Waypost sends to webhook receivers (RFC §12.2).
//
// An event is built from a published feed item and carries only references: the event id is the feed
// item_id, source is the space's stable source_uri, and data holds api_version, the resource IDs, the
// resource version where there is one, and visible_seq as a string. Message bodies, subjects, memory
// content and receipt stages are never included: the receiver reads them with its own credentials.
//
// The encoded form is CloudEvents structured-mode JSON with a fixed member order, so the same feed item
// always encodes to the same bytes. Encoding is checked against event_max_bytes (SUPPLEMENT §5.3).
package event

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/waypost/waypost/domain"
)

// Event types (RFC §12.2).
const (
	TypeMessageCommitted        = "waypost.message.committed.v1"
	TypeMemoryRevisionPublished = "waypost.memory.revision.published.v1"
	TypeReceiptUpdated          = "waypost.receipt.updated.v1"
)

// Wire constants.
const (
	// MaxBytes is the default event_max_bytes: the largest encoded event Waypost sends (SUPPLEMENT §5.3).
	MaxBytes = 8192
	// SpecVersion is the CloudEvents specification version of every event.
	SpecVersion = "1.0"
	// DataContentType is the datacontenttype of every event.
	DataContentType = "application/json"
	// ContentType is the HTTP Content-Type of a structured-mode CloudEvent.
	ContentType = "application/cloudevents+json"
)

// Event is one encoded notification.
type Event struct {
	// ID is the CloudEvents id: the feed item_id. It is also the webhook-id of every delivery attempt.
	ID string
	// Source is the space's source_uri.
	Source string
	// Type is one of the Type constants.
	Type string
	// Subject names the resource, e.g. "messages/msg_1".
	Subject string
	// Time is the commit time of the feed item (UTC).
	Time time.Time
	// Data is the encoded data member.
	Data json.RawMessage
	// Bytes is the complete structured-mode encoding: the exact bytes to sign and send.
	Bytes []byte
}

// TooLargeError reports an event whose encoding exceeds the size limit.
type TooLargeError struct {
	ID   string
	Size int
	Max  int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("event %s: encoded size %d bytes exceeds event_max_bytes %d", e.ID, e.Size, e.Max)
}

// TypeFor returns the event type of a feed item type.
func TypeFor(t domain.ItemType) (string, error) {
	switch t {
	case domain.ItemMessage:
		return TypeMessageCommitted, nil
	case domain.ItemMemoryRevision:
		return TypeMemoryRevisionPublished, nil
	case domain.ItemReceipt:
		return TypeReceiptUpdated, nil
	default:
		return "", fmt.Errorf("event: no event type for feed item type %q", t)
	}
}

// FromFeedItem builds the event of a published feed item in a space whose source_uri is sourceURI, limited
// to MaxBytes.
func FromFeedItem(sourceURI string, item domain.FeedItem) (Event, error) {
	return FromFeedItemMax(sourceURI, item, MaxBytes)
}

// FromFeedItemMax is FromFeedItem with a deployment's own event_max_bytes. A maxBytes outside
// 1..MaxBytes is an error: a deployment may publish a smaller limit, never a larger one.
func FromFeedItemMax(sourceURI string, item domain.FeedItem, maxBytes int) (Event, error) {
	if maxBytes < 1 || maxBytes > MaxBytes {
		return Event{}, fmt.Errorf("event: max bytes %d outside 1..%d", maxBytes, MaxBytes)
	}
	if err := checkItem(sourceURI, item); err != nil {
		return Event{}, fmt.Errorf("event %q: %w", item.ItemID, err)
	}
	typ, err := TypeFor(item.ItemType)
	if err != nil {
		return Event{}, err
	}
	subject, data, err := subjectAndData(item)
	if err != nil {
		return Event{}, fmt.Errorf("event %q: %w", item.ItemID, err)
	}
	dataBytes, err := json.Marshal(data)
	if err != nil {
		return Event{}, fmt.Errorf("event %q: encoding data: %w", item.ItemID, err)
	}
	ev := Event{ID: item.ItemID, Source: sourceURI, Type: typ, Subject: subject, Time: item.CommittedAt.UTC(), Data: dataBytes}
	if err := validate(ev); err != nil {
		return Event{}, fmt.Errorf("event %q: %w", item.ItemID, err)
	}
	ev.Bytes, err = json.Marshal(wireEvent{
		SpecVersion: SpecVersion, ID: ev.ID, Source: ev.Source, Type: ev.Type, Subject: ev.Subject,
		Time: ev.Time.Format(time.RFC3339Nano), DataContentType: DataContentType, Data: ev.Data,
	})
	if err != nil {
		return Event{}, fmt.Errorf("event %q: encoding: %w", item.ItemID, err)
	}
	if len(ev.Bytes) > maxBytes {
		return Event{}, &TooLargeError{ID: ev.ID, Size: len(ev.Bytes), Max: maxBytes}
	}
	return ev, nil
}

// wireEvent fixes the member order of the structured-mode encoding (the order of RFC §12.2's example).
type wireEvent struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Subject         string          `json:"subject"`
	Time            string          `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	Data            json.RawMessage `json:"data"`
}

// messageData is the data of waypost.message.committed.v1.
type messageData struct {
	APIVersion string  `json:"api_version"`
	MessageID  string  `json:"message_id"`
	VisibleSeq string  `json:"visible_seq"`
	ThreadID   *string `json:"thread_id,omitempty"`
}

// memoryRevisionData is the data of waypost.memory.revision.published.v1.
type memoryRevisionData struct {
	APIVersion   string `json:"api_version"`
	CollectionID string `json:"collection_id"`
	Revision     int64  `json:"revision"`
	VisibleSeq   string `json:"visible_seq"`
}

// receiptData is the data of waypost.receipt.updated.v1.
type receiptData struct {
	APIVersion     string `json:"api_version"`
	ReceiptID      string `json:"receipt_id"`
	ReceiptVersion int64  `json:"receipt_version"`
	ConsumerID     string `json:"consumer_id"`
	AckedItemID    string `json:"acked_item_id"`
	ResourceID     string `json:"resource_id"`
	VisibleSeq     string `json:"visible_seq"`
}

func subjectAndData(item domain.FeedItem) (string, any, error) {
	switch item.ItemType {
	case domain.ItemMessage:
		if item.ThreadID != nil {
			if err := checkID("thread_id", *item.ThreadID); err != nil {
				return "", nil, err
			}
		}
		return "messages/" + item.ResourceID,
			messageData{APIVersion: domain.APIVersion, MessageID: item.ResourceID, VisibleSeq: item.VisibleSeq, ThreadID: item.ThreadID}, nil
	case domain.ItemMemoryRevision:
		if item.ResourceVersion < 1 {
			return "", nil, fmt.Errorf("memory revision %d is not positive", item.ResourceVersion)
		}
		return "collections/" + item.ResourceID + "/revisions/" + strconv.FormatInt(item.ResourceVersion, 10),
			memoryRevisionData{APIVersion: domain.APIVersion, CollectionID: item.ResourceID, Revision: item.ResourceVersion, VisibleSeq: item.VisibleSeq}, nil
	case domain.ItemReceipt:
		var rd domain.ReceiptItemData
		if err := json.Unmarshal(item.Data, &rd); err != nil {
			return "", nil, fmt.Errorf("decoding receipt item data: %w", err)
		}
		for _, f := range []struct{ name, v string }{{"consumer_id", rd.ConsumerID}, {"acked_item_id", rd.AckedItemID}, {"resource_id", rd.ResourceID}} {
			if err := checkID(f.name, f.v); err != nil {
				return "", nil, err
			}
		}
		if item.ResourceVersion < 1 {
			return "", nil, fmt.Errorf("receipt version %d is not positive", item.ResourceVersion)
		}
		return "receipts/" + item.ResourceID, receiptData{APIVersion: domain.APIVersion, ReceiptID: item.ResourceID,
			ReceiptVersion: item.ResourceVersion, ConsumerID: rd.ConsumerID, AckedItemID: rd.AckedItemID,
			ResourceID: rd.ResourceID, VisibleSeq: item.VisibleSeq}, nil
	default:
		return "", nil, fmt.Errorf("no event type for feed item type %q", item.ItemType)
	}
}

func checkItem(sourceURI string, item domain.FeedItem) error {
	u, err := url.Parse(sourceURI)
	if err != nil || u.Scheme == "" || strings.TrimSpace(sourceURI) != sourceURI {
		return fmt.Errorf("source_uri %q is not an absolute URI", sourceURI)
	}
	if err := checkID("item_id", item.ItemID); err != nil {
		return err
	}
	if err := checkID("resource_id", item.ResourceID); err != nil {
		return err
	}
	if n, err := strconv.ParseUint(item.VisibleSeq, 10, 64); err != nil || n == 0 || strconv.FormatUint(n, 10) != item.VisibleSeq {
		return fmt.Errorf("visible_seq %q is not a positive canonical decimal", item.VisibleSeq)
	}
	if item.CommittedAt.IsZero() {
		return fmt.Errorf("committed_at is zero")
	}
	return nil
}

// checkID keeps IDs usable as subject path segments.
func checkID(field, v string) error {
	if !domain.ValidID(v) {
		return fmt.Errorf("%s %q is not a public ID", field, v)
	}
	return nil
}

// validate checks the CloudEvents 1.0 attribute rules the event must meet (id, source and type non-empty,
// source a URI-reference, data valid JSON for its application/json datacontenttype). checkItem has already
// made id a public ID and source an absolute URI; TestSDKRoundTrip checks every event type against the
// CloudEvents SDK's own validation, which the functions do not link (issue 17: binary size).
func validate(ev Event) error {
	switch {
	case ev.ID == "":
		return fmt.Errorf("invalid CloudEvent: empty id")
	case ev.Type == "":
		return fmt.Errorf("invalid CloudEvent: empty type")
	case ev.Source == "":
		return fmt.Errorf("invalid CloudEvent: empty source")
	case ev.Time.IsZero():
		return fmt.Errorf("invalid CloudEvent: zero time")
	case !json.Valid(ev.Data):
		return fmt.Errorf("invalid CloudEvent: data is not JSON")
	}
	if _, err := url.Parse(ev.Source); err != nil {
		return fmt.Errorf("invalid CloudEvent: source: %w", err)
	}
	return nil
}
