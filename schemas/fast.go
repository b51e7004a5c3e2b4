package schemas

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Quick acceptance of the busiest requests. A general JSON Schema validator walks a compiled schema for
// every value; for the request bodies sent the most (message.send, inbox.read, inbox.ack) a direct check of
// the parsed document answers "valid" in a fraction of that time. It only ever accepts: a document it does
// not accept at once — anything unusual, and every invalid one — goes to the compiled schema, which decides
// and reports the failures exactly as before. So it must never accept a document its schema refuses:
// TestQuickAcceptIsSound (rapid, documents at and across every bound of these schemas) and FuzzQuickAccept
// check that, and TestQuickAcceptAcceptsTypicalRequests that it is used.

// quickAccept returns the quick check of the schema called name for a document parsed by
// strictjson.Parse, or nil when it has none.
func quickAccept(name string) func(doc any) bool {
	switch name {
	case "message.send.request":
		return quickSend
	case "inbox.read.request":
		return quickInboxRead
	case "inbox.ack.request":
		return quickInboxAck
	}
	return nil
}

// quickSend accepts a message.send request body (message.send.request.json).
func quickSend(doc any) bool {
	m, ok := doc.(map[string]any)
	if !ok {
		return false
	}
	_, hasRecipients := m["recipient_ids"]
	for k, v := range m {
		switch k {
		case "request_id":
			if !isRequestID(v) {
				return false
			}
		case "recipient_ids":
			if !isIDList(v, 1, 64) {
				return false
			}
		case "thread_id":
			if v != nil && !isID(v) {
				return false
			}
		case "in_reply_to":
			if v == nil {
				continue
			}
			if !isID(v) || !hasRecipients { // if in_reply_to is a string, then recipient_ids is required
				return false
			}
		case "kind":
			if !isKind(v) {
				return false
			}
		case "subject":
			if _, ok := v.(string); !ok {
				return false
			}
		case "body":
			b, ok := v.(map[string]any)
			if !ok || len(b) != 1 {
				return false
			}
			if _, ok := b["text"].(string); !ok {
				return false
			}
		case "source":
			s, ok := v.(map[string]any)
			if !ok {
				return false
			}
			for sk, sv := range s {
				if sk != "native_thread_id" && sk != "native_message_id" || !isStringMax(sv, 256) {
					return false
				}
			}
		case "attachment_ids":
			if !isIDList(v, 0, 32) {
				return false
			}
		case "metadata":
			if _, ok := v.(map[string]any); !ok {
				return false
			}
		default:
			return false
		}
	}
	_, hasID := m["request_id"]
	_, hasBody := m["body"]
	return hasID && hasBody
}

// quickInboxRead accepts an inbox.read request body (inbox.read.request.json).
func quickInboxRead(doc any) bool {
	m, ok := doc.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range m {
		switch k {
		case "consumer_id":
			if !isID(v) {
				return false
			}
		case "cursor":
			if v != nil && !isStringMax(v, 2048) {
				return false
			}
		case "limit":
			if !isIntIn(v, 1, 200) {
				return false
			}
		default:
			return false
		}
	}
	_, ok = m["consumer_id"]
	return ok
}

// quickInboxAck accepts an inbox.ack request body (inbox.ack.request.json).
func quickInboxAck(doc any) bool {
	m, ok := doc.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range m {
		switch k {
		case "request_id":
			if !isRequestID(v) {
				return false
			}
		case "consumer_id":
			if !isID(v) {
				return false
			}
		case "items":
			items, ok := v.([]any)
			if !ok || len(items) > 100 {
				return false
			}
			for _, it := range items {
				e, ok := it.(map[string]any)
				if !ok || len(e) != 2 || !isID(e["item_id"]) {
					return false
				}
				if st, ok := e["stage"].(string); !ok || st != "received" && st != "processed" {
					return false
				}
			}
		case "checkpoint_cursor":
			if v != nil && !isStringMax(v, 2048) {
				return false
			}
		default:
			return false
		}
	}
	_, hasID := m["request_id"]
	_, hasConsumer := m["consumer_id"]
	_, hasItems := m["items"]
	return hasID && hasConsumer && hasItems
}

// isID: common.json#/$defs/id, ^[A-Za-z0-9_-]{1,96}$.
func isID(v any) bool {
	s, ok := v.(string)
	if !ok || len(s) < 1 || len(s) > 96 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// isRequestID: common.json#/$defs/request_id, ^[A-Za-z0-9_.:-]{1,128}$.
func isRequestID(v any) bool {
	s, ok := v.(string)
	if !ok || len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '.' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

// isKind: common.json#/$defs/kind, ^[a-z][a-z0-9_.-]{0,63}$.
func isKind(v any) bool {
	s, ok := v.(string)
	if !ok || len(s) < 1 || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z') && !('0' <= c && c <= '9') && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
}

// isIDList is an array of min to max IDs.
func isIDList(v any, min, max int) bool {
	l, ok := v.([]any)
	if !ok || len(l) < min || len(l) > max {
		return false
	}
	for _, e := range l {
		if !isID(e) {
			return false
		}
	}
	return true
}

// isStringMax is a string of at most max characters (JSON Schema's maxLength counts code points).
func isStringMax(v any, max int) bool {
	s, ok := v.(string)
	return ok && (len(s) <= max || utf8.RuneCountInString(s) <= max)
}

// isIntIn is an integer from min to max written as plain digits (anything else is left to the schema).
func isIntIn(v any, min, max int64) bool {
	n, ok := v.(json.Number)
	if !ok || len(n) == 0 || len(n) > 18 {
		return false
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return false
		}
	}
	x, err := strconv.ParseInt(string(n), 10, 64)
	return err == nil && x >= min && x <= max
}
