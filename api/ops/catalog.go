package ops

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/waypost/waypost/domain"
)

// Names of the operations the HTTP transport serves with handlers of its own (Op.Stream).
const (
	Upload       = "blob.upload"
	BlobContent  = "blob.content"
	MemoryExport = "memory.export"
	SchemaList   = "schemas.list"
	SchemaGet    = "schemas.get"
	OpenAPI      = "openapi"
)

// adminSpace is the prefix of the control-plane routes of one space.
const adminSpace = "/admin/v0/spaces/{space_id}"

// List returns every operation: the data plane (DataPlane) and the control plane (SUPPLEMENT §11.3).
func List() []*Op { return append(DataPlane(), adminOps()...) }

// DataPlane returns the operations a space's token calls: SUPPLEMENT §11.1 and the webhook subscriptions
// (RFC §12.3), every MCP tool among them. (The MCP function serves these alone, which keeps the control
// plane out of its binary: issue 17's size budget.) The status operations keep this order.
func DataPlane() []*Op {
	all := append(dataOps(), subscriptionOps()...)
	for _, o := range all {
		if o.Name == "status" { // status takes exactly the write operations above
			o.Args = object([]string{"operation", "request_id"}, props{"operation": enum(submissions(all)), "request_id": requestIDArg()})
		}
	}
	return all
}

// submissions are the names of the write operations of list (Op.Submission), in its order.
func submissions(list []*Op) []string {
	var names []string
	for _, o := range list {
		if o.Submission {
			names = append(names, o.Name)
		}
	}
	return names
}

// unsupportedNote ends the description of every webhook tool: the tools are always listed, so that a client
// sees one tool list whatever the deployment, and answer UNSUPPORTED where webhook_events is off.
const unsupportedNote = " Needs the subscription.manage scope; where waypost_describe reports capabilities.webhook_events=false it answers UNSUPPORTED: poll with waypost_inbox or waypost_wait instead."

func dataOps() []*Op {
	return []*Op{
		define(Op{Name: "describe", Method: "GET", Path: "/v0/describe", Plane: Data, Function: FnMailbox,
			Args: object(nil, nil), Response: "describe.response",
			Tool: &Tool{Name: "waypost_describe", Title: "Describe", ReadOnly: true,
				Description: "Who you are, the default and allowed recipients, the real limits and the capabilities. Call it first."}},
			func(ctx context.Context, c Call, _ *struct{}) (any, error) {
				return c.Svc.Describe(ctx, c.P)
			}),
		define(Op{Name: "status", Method: "GET", Path: "/v0/status", Plane: Data, Function: FnMailbox,
			Response: "status.response", // Args: set by List
			Tool: &Tool{Name: "waypost_status", Title: "Submission status", ReadOnly: true,
				Description: "State (reserved, prepared, committed, failed) and stable result of one of your writes, by operation and request_id. Use it after a timeout before retrying with the same request_id."}},
			func(ctx context.Context, c Call, r *struct {
				Operation string `json:"operation"`
				RequestID string `json:"request_id"`
			}) (any, error) {
				return c.Svc.Status(ctx, c.P, r.Operation, r.RequestID)
			}),
		define(Op{Name: domain.OpMessageSend, Method: "POST", Path: "/v0/messages", Plane: Data, Function: FnMailbox,
			Scopes: []domain.Scope{domain.ScopeMessageSend}, Request: "message.send.request", Response: "message.send.response", Submission: true, Examples: map[string]string{"send": `{"request_id": "req-send-0001", "recipient_ids": ["act_b"], "subject": "Build report", "body": {"text": "The nightly build passed."}}`}, Errors: []domain.Code{domain.CodeBlobNotSealed, domain.CodeUnsupported},
			Tool: &Tool{Name: "waypost_send", Title: "Send a message",
				Description: "Publish a message. Persist request_id before calling; retry only with the same request_id. Replies (in_reply_to) must name recipients. Stored only when submission_state is committed."}},
			func(ctx context.Context, c Call, r *domain.SendRequest) (any, error) {
				return c.Svc.SendMessage(ctx, c.P, *r)
			}),
		define(Op{Name: "message.get", Method: "GET", Path: "/v0/messages/{message_id}", Plane: Data, Function: FnMailbox,
			Scopes: []domain.Scope{domain.ScopeMessageRead}, Args: object([]string{"message_id"}, props{"message_id": idArg()}),
			Response: "message.get.response",
			Tool: &Tool{Name: "waypost_get_message", Title: "Get a message", ReadOnly: true,
				Description: "A published message with its body, recipients and attachments."}},
			func(ctx context.Context, c Call, r *struct {
				MessageID string `json:"message_id"`
			}) (any, error) {
				return c.Svc.GetMessage(ctx, c.P, r.MessageID)
			}),
		define(Op{Name: "inbox.read", Method: "POST", Path: "/v0/inbox/read", Plane: Data, Function: FnMailbox,
			Scopes: []domain.Scope{domain.ScopeMessageRead}, Request: "inbox.read.request", Response: "inbox.read.response", Examples: map[string]string{"from the start": `{"consumer_id": "con_b", "cursor": null, "limit": 50}`}, Errors: []domain.Code{domain.CodeInvalidCursor, domain.CodeCursorScopeChanged, domain.CodeCursorExpired, domain.CodeUnsupported},
			Tool: &Tool{Name: "waypost_inbox", Title: "Read the inbox", ReadOnly: true,
				Description: "The next page of your consumer's feed after cursor (null = from the start). Save the items, then acknowledge with waypost_ack and the returned next_cursor."}},
			func(ctx context.Context, c Call, r *domain.ReadRequest) (any, error) {
				return c.Svc.ReadInbox(ctx, c.P, *r)
			}),
		define(Op{Name: domain.OpInboxAck, Method: "POST", Path: "/v0/inbox/ack", Plane: Data, Function: FnMailbox,
			Scopes: []domain.Scope{domain.ScopeReceiptWrite}, Request: "inbox.ack.request", Response: "inbox.ack.response", Submission: true, Examples: map[string]string{"processed": `{"request_id": "req-ack-0001", "consumer_id": "con_b", "items": [{"item_id": "itm_0001", "stage": "processed"}], "checkpoint_cursor": "c1.opaque"}`}, Errors: []domain.Code{domain.CodeInvalidCursor, domain.CodeCursorScopeChanged, domain.CodeCursorExpired},
			Tool: &Tool{Name: "waypost_ack", Title: "Acknowledge",
				Description: "Record received/processed receipts and a checkpoint cursor, after the items are saved."}},
			func(ctx context.Context, c Call, r *domain.AckRequest) (any, error) {
				return c.Svc.Ack(ctx, c.P, *r)
			}),
		define(Op{Name: "feed.wait", Method: "GET", Path: "/v0/feed/wait", Plane: Data, Function: FnChannel,
			Scopes: []domain.Scope{domain.ScopeMessageRead}, Response: "inbox.read.response", Errors: []domain.Code{domain.CodeInvalidCursor, domain.CodeCursorScopeChanged, domain.CodeCursorExpired, domain.CodeUnsupported},
			Args: object([]string{"consumer_id"}, props{"consumer_id": idArg(), "cursor": cursorArg(),
				"timeout_ms": map[string]any{"type": "integer", "minimum": 0}, "limit": limitArg()}),
			Tool: &Tool{Name: "waypost_wait", Title: "Wait for new items", ReadOnly: true, LiveFeed: true,
				Description: "Long poll: returns as soon as an item visible to the consumer commits after cursor, or an empty page at timeout_ms."}},
			func(ctx context.Context, c Call, r *domain.WaitRequest) (any, error) {
				return c.Svc.WaitFeed(ctx, c.P, *r)
			}),
		define(Op{Name: domain.OpBlobPrepare, Method: "POST", Path: "/v0/blobs", Plane: Data, Function: FnBlobs,
			Scopes: []domain.Scope{domain.ScopeBlobWrite}, Request: "blob.prepare.request", Response: "blob.prepare.response", Submission: true, Errors: []domain.Code{domain.CodeUnsupported},
			Tool: &Tool{Name: "waypost_blob_prepare", Title: "Prepare a blob upload",
				Description: "Reserve an upload for a file of known size and SHA-256. Upload the bytes with one HTTP PUT to upload_url carrying exactly upload_headers (add Authorization: Bearer only when upload_url is on this service; a presigned storage URL takes no credential and refuses other bytes), then call waypost_blob_commit. Hosts without file transfer cannot upload: say so."}},
			func(ctx context.Context, c Call, r *domain.BlobPrepareRequest) (any, error) {
				res, err := c.Svc.PrepareBlob(ctx, c.P, *r)
				res.UploadURL = c.Link(res.UploadURL)
				return res, err
			}),
		{Name: Upload, Method: "PUT", Path: "/v0/uploads/{upload_id}/content", Plane: Data, Function: FnBlobs,
			Scopes: []domain.Scope{domain.ScopeBlobWrite}, Response: "upload.response", Stream: true, Errors: []domain.Code{domain.CodeChecksumMismatch, domain.CodeInvalidBlob, domain.CodeUploadExpired, domain.CodeUploadContentConflict, domain.CodeUploadSealed}},
		define(Op{Name: domain.OpBlobCommit, Method: "POST", Path: "/v0/blobs/commit", Plane: Data, Function: FnBlobs,
			Scopes: []domain.Scope{domain.ScopeBlobWrite}, Request: "blob.commit.request", Response: "blob.info", Submission: true, Errors: []domain.Code{domain.CodeChecksumMismatch, domain.CodeInvalidBlob, domain.CodeUploadExpired, domain.CodeUploadContentConflict, domain.CodeUploadSealed},
			Tool: &Tool{Name: "waypost_blob_commit", Title: "Seal an uploaded blob",
				Description: "Seal an uploaded blob after its bytes were PUT; only sealed blobs can be attached or referenced."}},
			func(ctx context.Context, c Call, r *domain.BlobCommitRequest) (any, error) {
				return c.Svc.CommitBlob(ctx, c.P, *r)
			}),
		define(Op{Name: "blob.get", Method: "GET", Path: "/v0/blobs/{blob_id}", Plane: Data, Function: FnBlobs,
			Scopes: []domain.Scope{domain.ScopeBlobRead}, Args: object([]string{"blob_id"}, props{"blob_id": idArg()}), Response: "blob.info",
			Tool: &Tool{Name: "waypost_blob_get", Title: "Get blob metadata", ReadOnly: true,
				Description: "Blob metadata and, once sealed, download_url: on this service an HTTP GET with the same bearer token; where download_expires_at is set, a short-lived presigned storage URL that needs no credential. The bytes are never put in the tool result."}},
			func(ctx context.Context, c Call, r *struct {
				BlobID string `json:"blob_id"`
			}) (any, error) {
				res, err := c.Svc.GetBlob(ctx, c.P, r.BlobID)
				res.DownloadURL = c.Link(res.DownloadURL)
				return res, err
			}),
		{Name: BlobContent, Method: "GET", Path: "/v0/blobs/{blob_id}/content", Plane: Data, Function: FnBlobs,
			Scopes: []domain.Scope{domain.ScopeBlobRead}, Stream: true, Errors: []domain.Code{domain.CodeBlobNotSealed}},
		define(Op{Name: domain.OpMemoryPublish, Method: "POST", Path: "/v0/collections/{collection_id}/revisions", Plane: Data, Function: FnMemory,
			Scopes: []domain.Scope{domain.ScopeMemoryWrite}, Request: "memory.publish.request", Response: "memory.publish.response", Submission: true, Errors: []domain.Code{domain.CodeRevisionConflict, domain.CodeBlobNotSealed, domain.CodeInvalidManifest, domain.CodeUnsupported},
			Tool: &Tool{Name: "waypost_memory_publish", Title: "Publish memory",
				Description: "Publish a revision of a collection: mode snapshot (the whole authorized collection; absent items become tombstones) or delta (upserts and delete_ids). expected_revision is a compare-and-set; on REVISION_CONFLICT read the current state first. collection_id is required here."}},
			func(ctx context.Context, c Call, r *struct {
				domain.MemoryPublishRequest
				InPath string `json:"-" path:"collection_id"`
			}) (any, error) {
				coll := r.InPath
				if coll == "" { // MCP: the collection is named in the arguments
					if coll = r.CollectionID; coll == "" {
						return domain.MemoryPublishResult{}, domain.Errorf(domain.CodeInvalidRequest, "collection_id is required").WithDetails("field", "collection_id")
					}
				}
				return c.Svc.PublishMemory(ctx, c.P, coll, r.MemoryPublishRequest)
			}),
		define(Op{Name: "memory.read", Method: "GET", Path: "/v0/collections/{collection_id}/items", Plane: Data, Function: FnMemory,
			Scopes: []domain.Scope{domain.ScopeMemoryRead}, Response: "memory.read.response", Errors: []domain.Code{domain.CodeInvalidCursor},
			Args: object([]string{"collection_id"}, props{"collection_id": idArg(), "revision": revisionArg(),
				"limit": limitArg(), "cursor": cursorArg(), "include_tombstones": map[string]any{"type": "boolean"}}),
			Tool: &Tool{Name: "waypost_memory_read", Title: "Read memory", ReadOnly: true,
				Description: "Items of one revision of a collection (latest when revision is null), in item_id order; keep paging with next_cursor, which stays on the same revision."}},
			func(ctx context.Context, c Call, r *struct {
				CollectionID string `json:"collection_id"`
				domain.MemoryReadRequest
			}) (any, error) {
				return c.Svc.ReadMemory(ctx, c.P, r.CollectionID, r.MemoryReadRequest)
			}),
		define(Op{Name: MemoryExport, Method: "GET", Path: "/v0/collections/{collection_id}/export", Plane: Data, Function: FnMemory,
			Scopes: []domain.Scope{domain.ScopeMemoryRead}, Response: "memory.export.response", Stream: true, Errors: []domain.Code{domain.CodeUnsupported},
			Args: object([]string{"collection_id"}, props{"collection_id": idArg(), "revision": revisionArg()}),
			Tool: &Tool{Name: "waypost_memory_export", Title: "Export memory", ReadOnly: true,
				Description: "A portable bundle of a collection revision: identity, source versions, items with paths, blob IDs and digests. Never credentials."}},
			func(ctx context.Context, c Call, r *ExportRequest) (any, error) {
				return c.Svc.ExportMemory(ctx, c.P, r.CollectionID, r.Revision)
			}),
		{Name: SchemaList, Method: "GET", Path: "/v0/schemas", Plane: Public, Function: FnMailbox, Stream: true,
			Summary: "The published JSON Schemas"},
		{Name: SchemaGet, Method: "GET", Path: "/v0/schemas/{name}", Plane: Public, Function: FnMailbox, Stream: true,
			Summary: "One published JSON Schema"},
		{Name: OpenAPI, Method: "GET", Path: "/v0/openapi.json", Plane: Public, Function: FnMailbox, Stream: true,
			Summary: "This API's OpenAPI 3.1 description"},
	}
}

// ExportRequest is the request of memory.export (the HTTP form adds ?format=, which its handler reads).
type ExportRequest struct {
	CollectionID string `json:"collection_id"`
	Revision     *int64 `json:"revision"`
}

// subscriptionOps are the webhook subscription operations (RFC §12.3, SUPPLEMENT §11.1). Without a webhook
// sender the domain answers UNSUPPORTED. The delivery secret of an upsert is never part of a response or a
// log line: results carry only mode and URL.
func subscriptionOps() []*Op {
	scopes := []domain.Scope{domain.ScopeSubscriptionManage}
	return []*Op{
		define(Op{Name: "subscription.list", Method: "GET", Path: "/v0/subscriptions", Plane: Data, Function: FnMailbox,
			Scopes: scopes, Args: object(nil, nil), Response: "subscription.list.response", Errors: []domain.Code{domain.CodeUnsupported},
			Tool: &Tool{Name: "waypost_subscriptions", Title: "List webhook subscriptions", ReadOnly: true,
				Description: "Your webhook subscriptions with their state, expiry and delivery health (last success, last failure and reason, consecutive failures)." + unsupportedNote}},
			func(ctx context.Context, c Call, _ *struct{}) (any, error) {
				return c.Svc.ListSubscriptions(ctx, c.P)
			}),
		define(Op{Name: domain.OpSubscriptionUpsert, Method: "POST", Path: "/v0/subscriptions", Plane: Data, Function: FnMailbox,
			Scopes: scopes, Request: "subscription.upsert.request", Response: "subscription.upsert.response", Submission: true, Errors: []domain.Code{domain.CodeUnsupported, domain.CodeWebhookVerification, domain.CodeForbiddenTarget},
			Tool: &Tool{Name: "waypost_subscribe", Title: "Subscribe a webhook", OpenWorld: true,
				Description: "Create or renew a webhook subscription for one of your consumers. The receiver must already hold delivery.secret (\"whsec_\" + base64 of 32 random bytes) and answer the signed verification challenge within 10 s, else WEBHOOK_VERIFICATION_FAILED; private or non-HTTPS targets are FORBIDDEN_TARGET. The same arguments with a new request_id renew the same subscription before refresh_before. Events only announce new items: read the content with waypost_inbox." + unsupportedNote}},
			func(ctx context.Context, c Call, r *domain.UpsertSubscriptionRequest) (any, error) {
				return c.Svc.UpsertSubscription(ctx, c.P, *r)
			}),
		define(Op{Name: domain.OpSubscriptionStop, Method: "POST", Path: "/v0/subscriptions/{subscription_id}/stop", Plane: Data, Function: FnMailbox,
			Scopes: scopes, Request: "subscription.stop.request", Response: "subscription.stop.response", Submission: true, Errors: []domain.Code{domain.CodeUnsupported},
			Tool: &Tool{Name: "waypost_unsubscribe", Title: "Stop a webhook subscription",
				Args:        object([]string{"subscription_id", "request_id"}, props{"subscription_id": idArg(), "request_id": requestIDArg()}),
				Description: "Stop a webhook subscription; stopping a stopped one succeeds again. Future attempts stop; a request already in flight may still arrive." + unsupportedNote}},
			func(ctx context.Context, c Call, r *struct {
				SubscriptionID string `json:"subscription_id" path:"subscription_id"`
				domain.StopSubscriptionRequest
			}) (any, error) {
				return c.Svc.StopSubscription(ctx, c.P, r.SubscriptionID, r.StopSubscriptionRequest)
			}),
	}
}

// inSpace is the space of a control-plane call, from the path.
type inSpace struct {
	SpaceID string `json:"-" path:"space_id"`
}

// adminOps are the control plane (SUPPLEMENT §11.3): the admin secret, no MCP tool.
func adminOps() []*Op {
	admin := func(name, method, path, request, response string) Op {
		return Op{Name: name, Method: method, Path: path, Plane: Admin, Function: FnAdmin, Request: request, Response: response}
	}
	return []*Op{
		define(admin("admin.space.create", "POST", "/admin/v0/spaces", "admin.space.create.request", "admin.space.create.response"),
			func(ctx context.Context, c Call, r *domain.CreateSpaceRequest) (any, error) {
				return c.Svc.CreateSpace(ctx, *r)
			}),
		define(withArgs(admin("admin.space.get", "GET", adminSpace, "", "admin.space.get.response"), spaceArgs(nil)),
			func(ctx context.Context, c Call, r *struct {
				SpaceID string `json:"space_id"`
			}) (any, error) {
				return c.Svc.GetSpace(ctx, r.SpaceID)
			}),
		define(withMerge(admin("admin.space.update", "PATCH", adminSpace, "admin.space.update.request", "admin.space.get.response"),
			"A JSON Merge Patch (RFC 7396) of the space's settings: members present change, absent members stay as they are, down to the members of rate_limits and quotas ({\"quotas\": {\"max_items\": 100}} keeps max_stored_bytes); null is refused (every setting has a value)."),
			func(ctx context.Context, c Call, r *struct {
				inSpace
				domain.UpdateSpaceRequest
			}) (any, error) {
				return c.Svc.UpdateSpace(ctx, r.SpaceID, r.UpdateSpaceRequest)
			}),
		define(withArgs(admin("admin.space.delete", "DELETE", adminSpace, "", "admin.space.get.response"), spaceArgs(nil)),
			func(ctx context.Context, c Call, r *struct {
				SpaceID string `json:"space_id"`
			}) (any, error) {
				return c.Svc.DeleteSpace(ctx, r.SpaceID)
			}),
		define(withArgs(admin("admin.space.stats", "GET", adminSpace+"/stats", "", "admin.space.stats.response"),
			spaceArgs(props{"max_scan": map[string]any{"type": "integer", "minimum": 1}})),
			func(ctx context.Context, c Call, r *struct {
				SpaceID string `json:"space_id"`
				MaxScan int    `json:"max_scan"`
			}) (any, error) {
				return c.Svc.GetStats(ctx, r.SpaceID, domain.StatsOptions{MaxScan: r.MaxScan})
			}),
		define(admin("admin.actor.create", "POST", adminSpace+"/actors", "admin.actor.create.request", "admin.actor.create.response"),
			func(ctx context.Context, c Call, r *struct {
				inSpace
				domain.CreateActorRequest
			}) (any, error) {
				return c.Svc.CreateActor(ctx, r.SpaceID, r.CreateActorRequest)
			}),
		define(admin("admin.actor.revoke", "POST", adminSpace+"/actors/{actor_id}/revoke", "admin.empty.request", "admin.actor.revoke.response"),
			func(ctx context.Context, c Call, r *change) (any, error) {
				return c.Svc.RevokeActor(ctx, r.SpaceID, r.ActorID, r.ChangeRequest)
			}),
		define(admin("admin.consumer.create", "POST", adminSpace+"/consumers", "admin.consumer.create.request", "admin.consumer.response"),
			func(ctx context.Context, c Call, r *struct {
				inSpace
				domain.CreateConsumerRequest
			}) (any, error) {
				return c.Svc.CreateConsumer(ctx, r.SpaceID, r.CreateConsumerRequest)
			}),
		define(withMerge(admin("admin.consumer.update", "PATCH", adminSpace+"/consumers/{consumer_id}", "admin.consumer.update.request", "admin.consumer.response"),
			"A JSON Merge Patch (RFC 7396) at the top level: view and filter each change only when present, and the other stays as it is. filter, when present, is the consumer's whole new filter (a member it omits is no restriction): its members are not merged one by one (docs/decisions.md). null is refused."),
			func(ctx context.Context, c Call, r *struct {
				inSpace
				ConsumerID string `json:"-" path:"consumer_id"`
				domain.UpdateConsumerRequest
			}) (any, error) {
				return c.Svc.UpdateConsumer(ctx, r.SpaceID, r.ConsumerID, r.UpdateConsumerRequest)
			}),
		define(admin("admin.collection.create", "POST", adminSpace+"/collections", "admin.collection.create.request", "admin.collection.create.response"),
			func(ctx context.Context, c Call, r *struct {
				inSpace
				domain.CreateCollectionRequest
			}) (any, error) {
				return c.Svc.CreateCollection(ctx, r.SpaceID, r.CreateCollectionRequest)
			}),
		define(admin("admin.grant.create", "POST", adminSpace+"/grants", "admin.grant.create.request", "admin.grant.create.response"),
			func(ctx context.Context, c Call, r *struct {
				inSpace
				domain.CreateGrantRequest
			}) (any, error) {
				return c.Svc.CreateGrant(ctx, r.SpaceID, r.CreateGrantRequest)
			}),
		define(admin("admin.grant.revoke", "POST", adminSpace+"/grants/{grant_id}/revoke", "admin.empty.request", "admin.grant.revoke.response"),
			func(ctx context.Context, c Call, r *change) (any, error) {
				return c.Svc.RevokeGrant(ctx, r.SpaceID, r.GrantID, r.ChangeRequest)
			}),
		define(admin("admin.token.create", "POST", adminSpace+"/tokens", "admin.token.create.request", "admin.token.response"),
			func(ctx context.Context, c Call, r *struct {
				inSpace
				domain.CreateTokenRequest
			}) (any, error) {
				return c.Svc.CreateToken(ctx, r.SpaceID, r.CreateTokenRequest)
			}),
		define(admin("admin.token.revoke", "POST", adminSpace+"/tokens/{token_id}/revoke", "admin.empty.request", "admin.token.revoke.response"),
			func(ctx context.Context, c Call, r *change) (any, error) {
				return c.Svc.RevokeToken(ctx, r.SpaceID, r.TokenID, r.ChangeRequest)
			}),
		define(admin("admin.token.rotate", "POST", adminSpace+"/tokens/{token_id}/rotate", "admin.empty.request", "admin.token.response"),
			func(ctx context.Context, c Call, r *change) (any, error) {
				return c.Svc.RotateToken(ctx, r.SpaceID, r.TokenID, r.ChangeRequest)
			}),
		define(withArgs(admin("admin.deliveries.list", "GET", adminSpace+"/deliveries", "", "admin.deliveries.response"),
			spaceArgs(props{"state": map[string]any{"type": "string"}})),
			func(ctx context.Context, c Call, r *struct {
				SpaceID string `json:"space_id"`
				State   string `json:"state"`
			}) (any, error) {
				return c.Svc.ListDeliveries(ctx, r.SpaceID, r.State)
			}),
		define(withArgs(admin("admin.space.list", "GET", "/admin/v0/spaces", "", "admin.space.list.response"), object(nil, nil)),
			func(ctx context.Context, c Call, _ *struct{}) (any, error) {
				return c.Svc.ListSpaces(ctx)
			}),
		spaceList("admin.actor.list", "/actors", "admin.actor.list.response",
			func(ctx context.Context, svc *domain.Service, space string) (any, error) {
				return svc.ListActors(ctx, space)
			}),
		spaceList("admin.consumer.list", "/consumers", "admin.consumer.list.response",
			func(ctx context.Context, svc *domain.Service, space string) (any, error) {
				return svc.ListConsumers(ctx, space)
			}),
		spaceList("admin.token.list", "/tokens", "admin.token.list.response",
			func(ctx context.Context, svc *domain.Service, space string) (any, error) {
				return svc.ListTokens(ctx, space)
			}),
		define(withArgs(admin("admin.oauth.client.list", "GET", "/admin/v0/oauth/clients", "", "admin.oauth.client.list.response"), object(nil, nil)),
			func(ctx context.Context, c Call, _ *struct{}) (any, error) {
				return c.Svc.ListOAuthClients(ctx)
			}),
		define(admin("admin.oauth.client.revoke", "POST", "/admin/v0/oauth/clients/{client_id}/revoke", "admin.empty.request", "admin.oauth.client.response"),
			func(ctx context.Context, c Call, r *struct {
				ClientID string `json:"-" path:"client_id"`
				domain.ChangeRequest
			}) (any, error) {
				return c.Svc.RevokeOAuthClient(ctx, r.ClientID)
			}),
		{Name: "admin.backup", Method: "POST", Path: "/admin/v0/backup", Plane: Admin, Function: FnAdmin, Embedded: true,
			Request: "admin.backup.request", Response: "admin.backup.response",
			Summary: "Back up the instance online into a directory (waypost serve only: on AWS, PITR and S3 versioning)"},
		define(withErrors(admin("admin.delivery.redeliver", "POST", adminSpace+"/deliveries/{delivery_id}/redeliver", "admin.empty.request", "admin.delivery.response"),
			domain.CodeUnsupported),
			func(ctx context.Context, c Call, r *struct {
				inSpace
				DeliveryID string `json:"-" path:"delivery_id"`
				domain.ChangeRequest
			}) (any, error) {
				return c.Svc.Redeliver(ctx, r.SpaceID, r.DeliveryID)
			}),
	}
}

// change is the request of the revoke and rotate calls: the IDs in the path, an optional request_id.
type change struct {
	inSpace
	ActorID string `json:"-" path:"actor_id"`
	GrantID string `json:"-" path:"grant_id"`
	TokenID string `json:"-" path:"token_id"`
	domain.ChangeRequest
}

func withArgs(op Op, args string) Op { op.Args = args; return op }

// spaceList defines a control-plane GET of one kind of a space's records (GET /admin/v0/spaces/{space_id}
// + suffix), which takes nothing but the space.
func spaceList(name, suffix, response string, list func(ctx context.Context, svc *domain.Service, space string) (any, error)) *Op {
	return define(withArgs(Op{Name: name, Method: "GET", Path: adminSpace + suffix, Plane: Admin, Function: FnAdmin, Response: response},
		spaceArgs(nil)),
		func(ctx context.Context, c Call, r *struct {
			SpaceID string `json:"space_id"`
		}) (any, error) {
			return list(ctx, c.Svc, r.SpaceID)
		})
}

func withMerge(op Op, merge string) Op { op.Merge = merge; return op }

func withErrors(op Op, codes ...domain.Code) Op { op.Errors = codes; return op }

// spaceArgs is the parameter schema of a control-plane GET: space_id from the path, and more.
func spaceArgs(more props) string {
	p := props{"space_id": idArg()}
	for k, v := range more {
		p[k] = v
	}
	return object([]string{"space_id"}, p)
}

// props are the properties of an object schema.
type props map[string]any

// object is the inline JSON Schema of an object with exactly the given properties.
func object(required []string, p props) string {
	m := map[string]any{"type": "object", "additionalProperties": false}
	if len(required) > 0 {
		m["required"] = required
	}
	if p != nil {
		m["properties"] = p
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("ops: encoding a schema: %v", err)) // maps of strings, numbers and lists always encode
	}
	return string(b)
}

func idArg() map[string]any {
	return map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_-]{1,96}$"}
}

func requestIDArg() map[string]any {
	return map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,128}$"}
}

func enum(values []string) map[string]any { return map[string]any{"type": "string", "enum": values} }

func limitArg() map[string]any { return map[string]any{"type": "integer", "minimum": 1} }

func cursorArg() map[string]any {
	return map[string]any{"anyOf": []any{map[string]any{"type": "string", "maxLength": 2048}, map[string]any{"type": "null"}}}
}

func revisionArg() map[string]any {
	return map[string]any{"anyOf": []any{map[string]any{"type": "integer", "minimum": 0}, map[string]any{"type": "null"}}}
}
