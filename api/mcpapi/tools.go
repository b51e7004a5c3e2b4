package mcpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/waypost/waypost/api/boundary"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/codec/strictjson"
	"github.com/waypost/waypost/schemas"
)

// callEnv is what a tool's run function gets.
type callEnv struct {
	ctx     context.Context
	p       *domain.Principal
	args    json.RawMessage
	baseURL string
}

// tool is one MCP tool: its name (SUPPLEMENT §11.1), input schema (a schemas/ name for operations that
// take a JSON body over HTTP, or a local schema for the ones HTTP takes from the path and query), the
// schemas/ name of its result's data, and run.
type tool struct {
	name        string
	title       string
	description string
	readOnly    bool
	openWorld   bool // the tool reaches a third party (the subscribe challenge goes to the receiver's URL)
	schema      string
	local       string
	output      string
	run         func(svc *domain.Service, e callEnv) (any, error)
}

// decode strictly decodes the (already schema-validated) arguments.
func decode[T any](e callEnv) (T, error) {
	var v T
	if err := strictjson.DecodeBytes(e.args, &v); err != nil {
		return v, boundary.Invalid(err)
	}
	return v, nil
}

func (h *Handler) tools() []tool {
	ts := []tool{
		{name: "waypost_describe", output: "describe.response", title: "Describe", readOnly: true, local: (`{"type":"object","additionalProperties":false}`),
			description: "Who you are, the default and allowed recipients, the real limits and the capabilities. Call it first.",
			run:         func(svc *domain.Service, e callEnv) (any, error) { return svc.Describe(e.ctx, e.p) }},
		{name: "waypost_status", output: "status.response", title: "Submission status", readOnly: true,
			local: (`{"type":"object","required":["operation","request_id"],"additionalProperties":false,"properties":{` +
				`"operation":{"type":"string","enum":` + jsonList(domain.StatusOperations()) + `},` +
				`"request_id":{"type":"string","pattern":"^[A-Za-z0-9_.:-]{1,128}$"}}}`),
			description: "State (reserved, prepared, committed, failed) and stable result of one of your writes, by operation and request_id. Use it after a timeout before retrying with the same request_id.",
			run: func(svc *domain.Service, e callEnv) (any, error) {
				a, err := decode[struct {
					Operation string `json:"operation"`
					RequestID string `json:"request_id"`
				}](e)
				if err != nil {
					return nil, err
				}
				return svc.Status(e.ctx, e.p, a.Operation, a.RequestID)
			}},
		{name: "waypost_send", output: "message.send.response", title: "Send a message", schema: "message.send.request",
			description: "Publish a message. Persist request_id before calling; retry only with the same request_id. Replies (in_reply_to) must name recipients. Stored only when submission_state is committed.",
			run: func(svc *domain.Service, e callEnv) (any, error) {
				req, err := decode[domain.SendRequest](e)
				if err != nil {
					return nil, err
				}
				return svc.SendMessage(e.ctx, e.p, req)
			}},
		{name: "waypost_get_message", output: "message.get.response", title: "Get a message", readOnly: true,
			local:       (`{"type":"object","required":["message_id"],"additionalProperties":false,"properties":{"message_id":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,96}$"}}}`),
			description: "A published message with its body, recipients and attachments.",
			run: func(svc *domain.Service, e callEnv) (any, error) {
				a, err := decode[struct {
					MessageID string `json:"message_id"`
				}](e)
				if err != nil {
					return nil, err
				}
				return svc.GetMessage(e.ctx, e.p, a.MessageID)
			}},
		{name: "waypost_inbox", output: "inbox.read.response", title: "Read the inbox", readOnly: true, schema: "inbox.read.request",
			description: "The next page of your consumer's feed after cursor (null = from the start). Save the items, then acknowledge with waypost_ack and the returned next_cursor.",
			run: func(svc *domain.Service, e callEnv) (any, error) {
				req, err := decode[domain.ReadRequest](e)
				if err != nil {
					return nil, err
				}
				return svc.ReadInbox(e.ctx, e.p, req)
			}},
		{name: "waypost_ack", output: "inbox.ack.response", title: "Acknowledge", schema: "inbox.ack.request",
			description: "Record received/processed receipts and a checkpoint cursor, after the items are saved.",
			run: func(svc *domain.Service, e callEnv) (any, error) {
				req, err := decode[domain.AckRequest](e)
				if err != nil {
					return nil, err
				}
				return svc.Ack(e.ctx, e.p, req)
			}},
		{name: "waypost_blob_prepare", output: "blob.prepare.response", title: "Prepare a blob upload", schema: "blob.prepare.request",
			description: "Reserve an upload for a file of known size and SHA-256. Upload the bytes with one HTTP PUT to upload_url carrying exactly upload_headers (add Authorization: Bearer only when upload_url is on this service; a presigned storage URL takes no credential and refuses other bytes), then call waypost_blob_commit. Hosts without file transfer cannot upload: say so.",
			run: func(svc *domain.Service, e callEnv) (any, error) {
				req, err := decode[domain.BlobPrepareRequest](e)
				if err != nil {
					return nil, err
				}
				res, err := svc.PrepareBlob(e.ctx, e.p, req)
				res.UploadURL = absolute(e.baseURL, res.UploadURL)
				return res, err
			}},
		{name: "waypost_blob_commit", output: "blob.info", title: "Seal an uploaded blob", schema: "blob.commit.request",
			description: "Seal an uploaded blob after its bytes were PUT; only sealed blobs can be attached or referenced.",
			run: func(svc *domain.Service, e callEnv) (any, error) {
				req, err := decode[domain.BlobCommitRequest](e)
				if err != nil {
					return nil, err
				}
				return svc.CommitBlob(e.ctx, e.p, req)
			}},
		{name: "waypost_blob_get", output: "blob.info", title: "Get blob metadata", readOnly: true,
			local:       (`{"type":"object","required":["blob_id"],"additionalProperties":false,"properties":{"blob_id":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,96}$"}}}`),
			description: "Blob metadata and, once sealed, download_url: on this service an HTTP GET with the same bearer token; where download_expires_at is set, a short-lived presigned storage URL that needs no credential. The bytes are never put in the tool result.",
			run: func(svc *domain.Service, e callEnv) (any, error) {
				a, err := decode[struct {
					BlobID string `json:"blob_id"`
				}](e)
				if err != nil {
					return nil, err
				}
				res, err := svc.GetBlob(e.ctx, e.p, a.BlobID)
				if res.DownloadURL != "" {
					res.DownloadURL = absolute(e.baseURL, res.DownloadURL)
				}
				return res, err
			}},
		{name: "waypost_memory_publish", output: "memory.publish.response", title: "Publish memory", schema: "memory.publish.request",
			description: "Publish a revision of a collection: mode snapshot (the whole authorized collection; absent items become tombstones) or delta (upserts and delete_ids). expected_revision is a compare-and-set; on REVISION_CONFLICT read the current state first. collection_id is required here.",
			run: func(svc *domain.Service, e callEnv) (any, error) {
				req, err := decode[domain.MemoryPublishRequest](e)
				if err != nil {
					return nil, err
				}
				if req.CollectionID == "" {
					return nil, domain.Errorf(domain.CodeInvalidRequest, "collection_id is required").WithDetails("field", "collection_id")
				}
				return svc.PublishMemory(e.ctx, e.p, req.CollectionID, req)
			}},
		{name: "waypost_memory_read", output: "memory.read.response", title: "Read memory", readOnly: true,
			local: (`{"type":"object","required":["collection_id"],"additionalProperties":false,"properties":{` +
				`"collection_id":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,96}$"},"revision":{"anyOf":[{"type":"integer","minimum":0},{"type":"null"}]},` +
				`"limit":{"type":"integer","minimum":1},"cursor":{"anyOf":[{"type":"string","maxLength":2048},{"type":"null"}]},"include_tombstones":{"type":"boolean"}}}`),
			description: "Items of one revision of a collection (latest when revision is null), in item_id order; keep paging with next_cursor, which stays on the same revision.",
			run: func(svc *domain.Service, e callEnv) (any, error) {
				a, err := decode[struct {
					CollectionID      string  `json:"collection_id"`
					Revision          *int64  `json:"revision"`
					Limit             int     `json:"limit"`
					Cursor            *string `json:"cursor"`
					IncludeTombstones *bool   `json:"include_tombstones"`
				}](e)
				if err != nil {
					return nil, err
				}
				return svc.ReadMemory(e.ctx, e.p, a.CollectionID, domain.MemoryReadRequest{Revision: a.Revision, Limit: a.Limit, Cursor: a.Cursor, IncludeTombstones: a.IncludeTombstones})
			}},
		{name: "waypost_memory_export", output: "memory.export.response", title: "Export memory", readOnly: true,
			local: (`{"type":"object","required":["collection_id"],"additionalProperties":false,"properties":{` +
				`"collection_id":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,96}$"},"revision":{"anyOf":[{"type":"integer","minimum":0},{"type":"null"}]}}}`),
			description: "A portable bundle of a collection revision: identity, source versions, items with paths, blob IDs and digests. Never credentials.",
			run: func(svc *domain.Service, e callEnv) (any, error) {
				a, err := decode[struct {
					CollectionID string `json:"collection_id"`
					Revision     *int64 `json:"revision"`
				}](e)
				if err != nil {
					return nil, err
				}
				return svc.ExportMemory(e.ctx, e.p, a.CollectionID, a.Revision)
			}},
	}
	ts = append(ts, subscriptionTools()...)
	if h.svc.Capabilities().LiveFeed {
		ts = append(ts, tool{name: "waypost_wait", output: "inbox.read.response", title: "Wait for new items", readOnly: true,
			local: (`{"type":"object","required":["consumer_id"],"additionalProperties":false,"properties":{` +
				`"consumer_id":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,96}$"},"cursor":{"anyOf":[{"type":"string","maxLength":2048},{"type":"null"}]},` +
				`"timeout_ms":{"type":"integer","minimum":0},"limit":{"type":"integer","minimum":1}}}`),
			description: "Long poll: returns as soon as an item visible to the consumer commits after cursor, or an empty page at timeout_ms.",
			run: func(svc *domain.Service, e callEnv) (any, error) {
				a, err := decode[struct {
					ConsumerID string  `json:"consumer_id"`
					Cursor     *string `json:"cursor"`
					TimeoutMS  int     `json:"timeout_ms"`
					Limit      int     `json:"limit"`
				}](e)
				if err != nil {
					return nil, err
				}
				return svc.WaitFeed(e.ctx, e.p, domain.WaitRequest{ConsumerID: a.ConsumerID, Cursor: a.Cursor, TimeoutMS: a.TimeoutMS, Limit: a.Limit})
			}})
	}
	return ts
}

// unsupportedNote ends the description of every webhook tool: the tools are always listed, so that a client
// sees one tool list whatever the deployment, and answer UNSUPPORTED where webhook_events is off.
const unsupportedNote = " Needs the subscription.manage scope; where waypost_describe reports capabilities.webhook_events=false it answers UNSUPPORTED: poll with waypost_inbox or waypost_wait instead."

// subscriptionTools are the webhook subscription operations (RFC §12.3, SUPPLEMENT §11.1).
func subscriptionTools() []tool {
	return []tool{
		{name: "waypost_subscriptions", output: "subscription.list.response", title: "List webhook subscriptions", readOnly: true, local: (`{"type":"object","additionalProperties":false}`),
			description: "Your webhook subscriptions with their state, expiry and delivery health (last success, last failure and reason, consecutive failures)." + unsupportedNote,
			run:         func(svc *domain.Service, e callEnv) (any, error) { return svc.ListSubscriptions(e.ctx, e.p) }},
		{name: "waypost_subscribe", output: "subscription.upsert.response", title: "Subscribe a webhook", schema: "subscription.upsert.request", openWorld: true,
			description: "Create or renew a webhook subscription for one of your consumers. The receiver must already hold delivery.secret (\"whsec_\" + base64 of 32 random bytes) and answer the signed verification challenge within 10 s, else WEBHOOK_VERIFICATION_FAILED; private or non-HTTPS targets are FORBIDDEN_TARGET. The same arguments with a new request_id renew the same subscription before refresh_before. Events only announce new items: read the content with waypost_inbox." + unsupportedNote,
			run: func(svc *domain.Service, e callEnv) (any, error) {
				req, err := decode[domain.UpsertSubscriptionRequest](e)
				if err != nil {
					return nil, err
				}
				return svc.UpsertSubscription(e.ctx, e.p, req)
			}},
		{name: "waypost_unsubscribe", output: "subscription.stop.response", title: "Stop a webhook subscription",
			local: (`{"type":"object","required":["subscription_id","request_id"],"additionalProperties":false,"properties":{` +
				`"subscription_id":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,96}$"},"request_id":{"type":"string","pattern":"^[A-Za-z0-9_.:-]{1,128}$"}}}`),
			description: "Stop a webhook subscription; stopping a stopped one succeeds again. Future attempts stop; a request already in flight may still arrive." + unsupportedNote,
			run: func(svc *domain.Service, e callEnv) (any, error) {
				a, err := decode[struct {
					SubscriptionID string `json:"subscription_id"`
					RequestID      string `json:"request_id"`
				}](e)
				if err != nil {
					return nil, err
				}
				return svc.StopSubscription(e.ctx, e.p, a.SubscriptionID, domain.StopSubscriptionRequest{RequestID: a.RequestID})
			}},
	}
}

// jsonList renders a list of strings as a JSON array (for local schemas built from domain constants).
func jsonList(list []string) string {
	b, err := json.Marshal(list)
	if err != nil {
		panic(fmt.Sprintf("mcpapi: encoding %v: %v", list, err)) // a []string always encodes
	}
	return string(b)
}

func absolute(base, path string) string {
	if base == "" || strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://") {
		return path
	}
	return strings.TrimSuffix(base, "/") + path
}

// inputSchema returns the tool's input schema as a standalone, portable JSON document (no references, no
// type arrays).
func (h *Handler) inputSchema(t tool) (json.RawMessage, error) {
	raw := json.RawMessage(t.local)
	if t.schema != "" {
		var err error
		if raw, err = h.reg.Bundled(t.schema); err != nil {
			return nil, err
		}
	}
	return schemas.Portable(raw)
}

// outputSchema describes a tool's structured content: the RFC §5.2 envelope, either ok with data of the
// named response schema, or an error (isError). It is standalone and portable like the input schemas.
func (h *Handler) outputSchema(data string) (json.RawMessage, error) {
	part := func(name string) (map[string]any, error) {
		raw, err := h.reg.Bundled(name)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", name, err)
		}
		delete(m, "$schema")
		return m, nil
	}
	ok, err := part("envelope.success")
	if err != nil {
		return nil, err
	}
	fail, err := part("envelope.error")
	if err != nil {
		return nil, err
	}
	d, err := part(data)
	if err != nil {
		return nil, err
	}
	props, isMap := ok["properties"].(map[string]any)
	if !isMap {
		return nil, fmt.Errorf("envelope.success has no properties")
	}
	props["data"] = d
	raw, err := json.Marshal(map[string]any{
		"type":        "object",
		"description": "The RFC-0001 §5.2 result envelope: ok with data, or (isError) ok false with error.",
		"anyOf":       []any{ok, fail},
	})
	if err != nil {
		return nil, err
	}
	return schemas.Portable(raw)
}
