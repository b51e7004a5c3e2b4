package domain

// Limits are the published limits of a deployment (SUPPLEMENT §5.3). A deployment may publish smaller
// values than the defaults, never larger ones silently.
type Limits struct {
	MaxRequestBytes          int   `json:"max_request_bytes"`
	MaxIDBytes               int   `json:"max_id_bytes"`
	MaxRequestIDBytes        int   `json:"max_request_id_bytes"`
	MaxSubjectBytes          int   `json:"max_subject_bytes"`
	MaxBodyTextBytes         int   `json:"max_body_text_bytes"`
	MaxMetadataBytes         int   `json:"max_metadata_bytes"`
	MaxRecipients            int   `json:"max_recipients"`
	MaxAttachments           int   `json:"max_attachments"`
	MaxBlobBytes             int64 `json:"max_blob_bytes"`
	UploadTTLSeconds         int   `json:"upload_ttl_seconds"`
	InboxPageDefault         int   `json:"inbox_page_default"`
	InboxPageMax             int   `json:"inbox_page_max"`
	AckItemsMax              int   `json:"ack_items_max"`
	MemoryInlineChangesMax   int   `json:"memory_inline_changes_max"`
	MemoryManifestChangesMax int   `json:"memory_manifest_changes_max"`
	CollectionEntriesMax     int   `json:"collection_entries_max"`
	MemoryItemMetadataBytes  int   `json:"memory_item_metadata_bytes"`
	MemoryPathBytes          int   `json:"memory_path_bytes"`
	MemoryReadPageDefault    int   `json:"memory_read_page_default"`
	MemoryReadPageMax        int   `json:"memory_read_page_max"`
	SubscriptionsPerConsumer int   `json:"subscriptions_per_consumer"`
	EventMaxBytes            int   `json:"event_max_bytes"`
	SubscriptionTTLDefault   int   `json:"subscription_ttl_default"`
	SubscriptionTTLMax       int   `json:"subscription_ttl_max"`
	RevisionMax              int64 `json:"revision_max"`
	VisibleSeqMax            int64 `json:"visible_seq_max"`
	FeedWaitMaxMS            int   `json:"feed_wait_max_ms"`
	// FeedWaitWaitersMax is how many feed.wait requests one space may hold at once on the process that
	// serves them (the live feed multiplexes them over one channel subscription per space).
	FeedWaitWaitersMax int `json:"feed_wait_waiters_max"`
	// SpaceMaxStoredBytes and SpaceMaxItems are the capacity quotas of the caller's space (quota.go): the
	// owner's, or the deployment's defaults.
	SpaceMaxStoredBytes int64 `json:"space_max_stored_bytes"`
	SpaceMaxItems       int64 `json:"space_max_items"`
}

// DefaultFeedWaitWaitersMax is the default bound on concurrent feed.wait requests of one space.
const DefaultFeedWaitWaitersMax = 16384

// MaxSafeInteger is 2^53-1, the largest revision and visible_seq (RFC §5.3).
const MaxSafeInteger = 1<<53 - 1

// DefaultLimits returns the SUPPLEMENT §5.3 defaults of the embedded deployment.
func DefaultLimits() Limits {
	return Limits{
		MaxRequestBytes:          65536,
		MaxIDBytes:               96,
		MaxRequestIDBytes:        128,
		MaxSubjectBytes:          512,
		MaxBodyTextBytes:         49152,
		MaxMetadataBytes:         8192,
		MaxRecipients:            32,
		MaxAttachments:           32,
		MaxBlobBytes:             104857600,
		UploadTTLSeconds:         3600,
		InboxPageDefault:         50,
		InboxPageMax:             200,
		AckItemsMax:              100,
		MemoryInlineChangesMax:   500,
		MemoryManifestChangesMax: 10000,
		CollectionEntriesMax:     10000,
		MemoryItemMetadataBytes:  2048,
		MemoryPathBytes:          1024,
		MemoryReadPageDefault:    100,
		MemoryReadPageMax:        500,
		SubscriptionsPerConsumer: 16,
		EventMaxBytes:            8192,
		SubscriptionTTLDefault:   86400,
		SubscriptionTTLMax:       604800,
		RevisionMax:              MaxSafeInteger,
		VisibleSeqMax:            MaxSafeInteger,
		FeedWaitMaxMS:            60000,
		FeedWaitWaitersMax:       DefaultFeedWaitWaitersMax,
		SpaceMaxStoredBytes:      DefaultSpaceMaxStoredBytes,
		SpaceMaxItems:            DefaultSpaceMaxItems,
	}
}

// Capabilities is the capability set published by describe (RFC §11.2). Missing or false means unsupported.
type Capabilities struct {
	Mailbox        bool `json:"mailbox"`
	Receipts       bool `json:"receipts"`
	BlobUpload     bool `json:"blob_upload"`
	MemorySnapshot bool `json:"memory_snapshot"`
	MemoryDelta    bool `json:"memory_delta"`
	WebhookEvents  bool `json:"webhook_events"`
	ServerExport   bool `json:"server_export"`
	LiveFeed       bool `json:"live_feed"`
	OAuth          bool `json:"oauth"`
}
