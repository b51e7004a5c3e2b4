package mcpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/waypost/waypost/api/boundary"
	"github.com/waypost/waypost/codec/strictjson"
	"github.com/waypost/waypost/domain"
)

// callEnv is what a tool's run function gets.
type callEnv struct {
	ctx     context.Context
	p       *domain.Principal
	args    json.RawMessage
	baseURL string
}

// tool is one MCP tool: its name (SUPPLEMENT §11.1), input schema (a schemas/ name for operations that
// take a JSON body over HTTP, or a local schema for the ones HTTP takes from the path and query), and run.
type tool struct {
	name        string
	title       string
	description string
	readOnly    bool
	openWorld   bool // the tool reaches a third party (the subscribe challenge goes to the receiver's URL)
	schema      string
	local       *localSchema
	run         func(svc *domain.Service, e callEnv) (any, error)
}

func (t tool) summary(data any) string {
	switch d := data.(type) {
	case domain.SendResult:
		return fmt.Sprintf("message %s %s (visible_seq %s, thread %s)", d.MessageID, d.SubmissionState, d.VisibleSeq, d.ThreadID)
	case domain.Page:
		return fmt.Sprintf("%d items, has_more=%v; save them before acknowledging with waypost_ack", len(d.Items), d.HasMore)
	case domain.AckResult:
		changed := 0
		for _, r := range d.Receipts {
			if r.Changed {
				changed++
			}
		}
		return fmt.Sprintf("%d receipts recorded (%d advanced)", len(d.Receipts), changed)
	case domain.StatusResult:
		return fmt.Sprintf("%s %s: %s", d.Operation, d.RequestID, d.SubmissionState)
	case domain.MemoryPublishResult:
		return fmt.Sprintf("collection %s at revision %d (changed=%v)", d.CollectionID, d.Revision, d.Changed)
	case domain.MemoryPage:
		return fmt.Sprintf("%d items of collection %s at revision %d, has_more=%v", len(d.Items), d.CollectionID, d.Revision, d.HasMore)
	case domain.SubscriptionResult:
		return fmt.Sprintf("subscription %s %s, expires_at %s; renew (same arguments, new request_id) before %s",
			d.SubscriptionID, d.State, d.ExpiresAt.Format(time.RFC3339), d.RefreshBefore.Format(time.RFC3339))
	case domain.SubscriptionList:
		return fmt.Sprintf("%d subscriptions", len(d.Subscriptions))
	case domain.StopSubscriptionResult:
		return fmt.Sprintf("subscription %s %s; requests already in flight may still arrive", d.SubscriptionID, d.State)
	default:
		return t.name + " succeeded; the result is in structuredContent"
	}
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
		{name: "waypost_describe", title: "Describe", readOnly: true, local: mustLocal(`{"type":"object","additionalProperties":false}`),
			description: "Who you are, the default and allowed recipients, the real limits and the capabilities. Call it first.",
			run:         func(svc *domain.Service, e callEnv) (any, error) { return svc.Describe(e.ctx, e.p) }},
		{name: "waypost_status", title: "Submission status", readOnly: true,
			local: mustLocal(`{"type":"object","required":["operation","request_id"],"additionalProperties":false,"properties":{` +
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
		{name: "waypost_send", title: "Send a message", schema: "message.send.request",
			description: "Publish a message. Persist request_id before calling; retry only with the same request_id. Replies (in_reply_to) must name recipients. Stored only when submission_state is committed.",
			run: func(svc *domain.Service, e callEnv) (any, error) {
				req, err := decode[domain.SendRequest](e)
				if err != nil {
					return nil, err
				}
				return svc.SendMessage(e.ctx, e.p, req)
			}},
		{name: "waypost_get_message", title: "Get a message", readOnly: true,
			local:       mustLocal(`{"type":"object","required":["message_id"],"additionalProperties":false,"properties":{"message_id":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,96}$"}}}`),
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
		{name: "waypost_inbox", title: "Read the inbox", readOnly: true, schema: "inbox.read.request",
			description: "The next page of your consumer's feed after cursor (null = from the start). Save the items, then acknowledge with waypost_ack and the returned next_cursor.",
			run: func(svc *domain.Service, e callEnv) (any, error) {
				req, err := decode[domain.ReadRequest](e)
				if err != nil {
					return nil, err
				}
				return svc.ReadInbox(e.ctx, e.p, req)
			}},
		{name: "waypost_ack", title: "Acknowledge", schema: "inbox.ack.request",
			description: "Record received/processed receipts and a checkpoint cursor, after the items are saved.",
			run: func(svc *domain.Service, e callEnv) (any, error) {
				req, err := decode[domain.AckRequest](e)
				if err != nil {
					return nil, err
				}
				return svc.Ack(e.ctx, e.p, req)
			}},
		{name: "waypost_blob_prepare", title: "Prepare a blob upload", schema: "blob.prepare.request",
			description: "Reserve an upload for a file of known size and SHA-256. Upload the bytes with HTTP PUT to upload_url (Authorization: Bearer, Content-Type as given), then call waypost_blob_commit. Hosts without file transfer cannot upload: say so.",
			run: func(svc *domain.Service, e callEnv) (any, error) {
				req, err := decode[domain.BlobPrepareRequest](e)
				if err != nil {
					return nil, err
				}
				res, err := svc.PrepareBlob(e.ctx, e.p, req)
				res.UploadURL = absolute(e.baseURL, res.UploadURL)
				return res, err
			}},
		{name: "waypost_blob_commit", title: "Seal an uploaded blob", schema: "blob.commit.request",
			description: "Seal an uploaded blob after its bytes were PUT; only sealed blobs can be attached or referenced.",
			run: func(svc *domain.Service, e callEnv) (any, error) {
				req, err := decode[domain.BlobCommitRequest](e)
				if err != nil {
					return nil, err
				}
				return svc.CommitBlob(e.ctx, e.p, req)
			}},
		{name: "waypost_blob_get", title: "Get blob metadata", readOnly: true,
			local:       mustLocal(`{"type":"object","required":["blob_id"],"additionalProperties":false,"properties":{"blob_id":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,96}$"}}}`),
			description: "Blob metadata and an authorized download URL (HTTP GET with the same bearer token). The bytes are never put in the tool result.",
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
		{name: "waypost_memory_publish", title: "Publish memory", schema: "memory.publish.request",
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
		{name: "waypost_memory_read", title: "Read memory", readOnly: true,
			local: mustLocal(`{"type":"object","required":["collection_id"],"additionalProperties":false,"properties":{` +
				`"collection_id":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,96}$"},"revision":{"type":["integer","null"],"minimum":0},` +
				`"limit":{"type":"integer","minimum":1},"cursor":{"type":["string","null"],"maxLength":2048},"include_tombstones":{"type":"boolean"}}}`),
			description: "Items of one revision of a collection (latest when revision is null), in item_id order; keep paging with next_cursor, which stays on the same revision.",
			run: func(svc *domain.Service, e callEnv) (any, error) {
				a, err := decode[struct {
					CollectionID      string  `json:"collection_id"`
					Revision          *int64  `json:"revision"`
					Limit             int     `json:"limit"`
					Cursor            *string `json:"cursor"`
					IncludeTombstones bool    `json:"include_tombstones"`
				}](e)
				if err != nil {
					return nil, err
				}
				return svc.ReadMemory(e.ctx, e.p, a.CollectionID, domain.MemoryReadRequest{Revision: a.Revision, Limit: a.Limit, Cursor: a.Cursor, IncludeTombstones: a.IncludeTombstones})
			}},
		{name: "waypost_memory_export", title: "Export memory", readOnly: true,
			local: mustLocal(`{"type":"object","required":["collection_id"],"additionalProperties":false,"properties":{` +
				`"collection_id":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,96}$"},"revision":{"type":["integer","null"],"minimum":0}}}`),
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
		ts = append(ts, tool{name: "waypost_wait", title: "Wait for new items", readOnly: true,
			local: mustLocal(`{"type":"object","required":["consumer_id"],"additionalProperties":false,"properties":{` +
				`"consumer_id":{"type":"string","pattern":"^[A-Za-z0-9_-]{1,96}$"},"cursor":{"type":["string","null"],"maxLength":2048},` +
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
		{name: "waypost_subscriptions", title: "List webhook subscriptions", readOnly: true, local: mustLocal(`{"type":"object","additionalProperties":false}`),
			description: "Your webhook subscriptions with their state, expiry and delivery health (last success, last failure and reason, consecutive failures)." + unsupportedNote,
			run:         func(svc *domain.Service, e callEnv) (any, error) { return svc.ListSubscriptions(e.ctx, e.p) }},
		{name: "waypost_subscribe", title: "Subscribe a webhook", schema: "subscription.upsert.request", openWorld: true,
			description: "Create or renew a webhook subscription for one of your consumers. The receiver must already hold delivery.secret (\"whsec_\" + base64 of 32 random bytes) and answer the signed verification challenge within 10 s, else WEBHOOK_VERIFICATION_FAILED; private or non-HTTPS targets are FORBIDDEN_TARGET. The same arguments with a new request_id renew the same subscription before refresh_before. Events only announce new items: read the content with waypost_inbox." + unsupportedNote,
			run: func(svc *domain.Service, e callEnv) (any, error) {
				req, err := decode[domain.UpsertSubscriptionRequest](e)
				if err != nil {
					return nil, err
				}
				return svc.UpsertSubscription(e.ctx, e.p, req)
			}},
		{name: "waypost_unsubscribe", title: "Stop a webhook subscription",
			local: mustLocal(`{"type":"object","required":["subscription_id","request_id"],"additionalProperties":false,"properties":{` +
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

// inputSchema returns the tool's input schema as a standalone JSON document.
func (h *Handler) inputSchema(t tool) (json.RawMessage, error) {
	if t.schema != "" {
		return h.reg.Bundled(t.schema)
	}
	return json.RawMessage(t.local.raw), nil
}

// localSchema is a small argument schema for tools whose HTTP form takes path or query parameters.
type localSchema struct {
	raw      string
	compiled *jsonschema.Schema
}

func mustLocal(raw string) *localSchema {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	if err != nil {
		panic(fmt.Sprintf("mcpapi: local schema: %v", err)) // a programming error in a constant
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://args.json", doc); err != nil {
		panic(fmt.Sprintf("mcpapi: local schema: %v", err))
	}
	s, err := c.Compile("mem://args.json")
	if err != nil {
		panic(fmt.Sprintf("mcpapi: local schema: %v", err))
	}
	return &localSchema{raw: raw, compiled: s}
}

func (l *localSchema) validate(args json.RawMessage) error {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(args)))
	if err != nil {
		return err
	}
	if err := l.compiled.Validate(doc); err != nil {
		return fmt.Errorf("arguments do not match the tool's input schema: %s", firstLine(err.Error()))
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i > 0 {
		return s[:i]
	}
	return s
}
