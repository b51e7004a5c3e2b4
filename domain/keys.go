package domain

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/waypost/waypost/domain/port"
)

// The single-table key layout, shared by every adapter (documented in docs/storage-keys.md).
// Partitions are chosen so that reads grow with what they return, not with the size of a space.

func seqSK(seq uint64) string { return port.SlotSK(seq) }

func parseSeqSK(sk string) (uint64, error) { return strconv.ParseUint(sk, 10, 64) }

func keySpace(space string) port.Key { return port.Key{PK: "SP#" + space, SK: "META"} }

// pkSpaces lists every space of the deployment (SK = space ID), written when a space is created; Verify
// reads it. Spaces are created rarely, so one partition serves.
const pkSpaces = "SX"

func keySpaceIndex(space string) port.Key   { return port.Key{PK: pkSpaces, SK: space} }
func keySeq(space string) port.Key          { return port.Key{PK: "SP#" + space, SK: "SEQ"} }
func keyActor(space, actor string) port.Key { return port.Key{PK: "SP#" + space, SK: "ACT#" + actor} }
func keyConsumer(space, consumer string) port.Key {
	return port.Key{PK: "SP#" + space, SK: "CON#" + consumer}
}
func keyCollection(space, coll string) port.Key {
	return port.Key{PK: "SP#" + space, SK: "COL#" + coll}
}
func keyTokenByID(space, token string) port.Key {
	return port.Key{PK: "SP#" + space, SK: "TOK#" + token}
}
func keyTokenByDigest(digest string) port.Key { return port.Key{PK: "TK#" + digest, SK: "T"} }
func pkGrants(space, actor string) string     { return "AG#" + space + "#" + actor }
func keyGrant(space, actor, grant string) port.Key {
	return port.Key{PK: pkGrants(space, actor), SK: grant}
}
func keyGrantRef(space, grant string) port.Key {
	return port.Key{PK: "SP#" + space, SK: "GRT#" + grant}
}
func keySubmission(space, producer, op, requestID string) port.Key {
	return port.Key{PK: "ID#" + space + "#" + producer, SK: op + "#" + requestID}
}
func keyMessage(space, msg string) port.Key {
	return port.Key{PK: "MS#" + space + "#" + msg, SK: "MSG"}
}

// keyThread is a thread's record: who produced and who received its messages, for the rule that only those
// who can see a message of a thread may join it by thread_id (RFC §6). A thread started without thread_id
// has no record until a reply or a thread_id send names it: its first message is found from its ID.
func keyThread(space, thread string) port.Key {
	return port.Key{PK: "TH#" + space + "#" + thread, SK: "THREAD"}
}

func pkFeed(space string) string { return "FD#" + space }

// keyHead is where a store that reserves visible_seq values before the transaction (DynamoDB) keeps the
// space's visible head; its own partition, so the watermark's writes do not share the counter's.
func keyHead(space string) port.Key { return port.Key{PK: "SH#" + space, SK: "HEAD"} }

// sequence is the visible_seq sequence of a space: counter SP#<space>|SEQ, slots FD#<space>|<seq> (the
// space feed items), head SH#<space>|HEAD.
func sequence(space string) *port.Sequence {
	return &port.Sequence{Counter: keySeq(space), Slots: pkFeed(space), Head: keyHead(space)}
}
func keyFeed(space string, seq uint64) port.Key {
	return port.Key{PK: pkFeed(space), SK: seqSK(seq)}
}
func pkInbox(space, actor string) string { return "IN#" + space + "#" + actor }
func keyInbox(space, actor string, seq uint64) port.Key {
	return port.Key{PK: pkInbox(space, actor), SK: seqSK(seq)}
}
func keyReceipt(space, consumer, item string) port.Key {
	return port.Key{PK: "RC#" + space + "#" + consumer, SK: item}
}
func keyCheckpoint(space, consumer string, viewRevision int64, grantFP string) port.Key {
	return port.Key{PK: "CP#" + space + "#" + consumer, SK: fmt.Sprintf("%020d#%s", viewRevision, grantFP)}
}

// adminProducer is the producer of control-plane submissions in the idempotency key.
const adminProducer = "_admin"

// globalSpace is the idempotency space of control-plane calls outside any space (space creation).
const globalSpace = "_"

// Attribute names used in conditions.
const (
	attrGen     = "gen"
	attrState   = "state"
	attrVersion = "v"
	attrPos     = "pos"
	attrDigest  = "digest"
	attrAt      = "at" // when a checkpoint last moved (RFC 3339)
)

func messageBodyKey(space, msg string) string {
	return "spaces/" + space + "/messages/" + msg + "/body.json"
}

func keyBlob(space, blob string) port.Key {
	return port.Key{PK: "BL#" + space + "#" + blob, SK: "BLOB"}
}
func keyUpload(space, upload string) port.Key {
	return port.Key{PK: "SP#" + space, SK: "UPL#" + upload}
}
func pkBlobRefs(space, blob string) string { return "BR#" + space + "#" + blob }
func keyBlobRef(space, blob, ref string) port.Key {
	return port.Key{PK: pkBlobRefs(space, blob), SK: ref}
}

// indexShards is how many partitions each deployment-wide index is spread over: the upload expiry index
// (UX), the webhook dispatch positions (WD) and the due index of delivery attempts (WQ). As one partition
// each, they would cap upload expiry and webhook delivery of the whole deployment at one DynamoDB
// partition's throughput (1,000 writes/s); an entry's shard is a hash of its identity, and readers sweep
// the index shard by shard. Entries written before the sharding stay in the unsharded partition (the base
// name), which readers sweep too, until it is empty.
const indexShards = 16

// indexShard returns the shard partition of an index entry: base#NN, NN a hash of identity.
func indexShard(base, identity string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(identity))
	return fmt.Sprintf("%s#%02d", base, h.Sum32()%indexShards)
}

// indexPartitions lists every partition of an index: its shards, then its unsharded partition.
func indexPartitions(base string) []string {
	out := make([]string, 0, indexShards+1)
	for i := range indexShards {
		out = append(out, fmt.Sprintf("%s#%02d", base, i))
	}
	return append(out, base)
}

// pkUploadExpiry is the upload expiry index: unsealed uploads ordered by expiry, worked by the sweeper.
const pkUploadExpiry = "UX"

func keyUploadExpiry(expires time.Time, space, upload string) port.Key {
	return port.Key{PK: indexShard(pkUploadExpiry, space+"#"+upload), SK: expires.UTC().Format("20060102T150405.000000000Z") + "#" + space + "#" + upload}
}

func blobObjectKey(space, blob string) string { return "spaces/" + space + "/blobs/" + blob }

// exportObjectKey names a generated ZIP export (ExportZipLink); the store's retention removes it.
func exportObjectKey(space, export string) string { return "exports/" + space + "/" + export + ".zip" }

func pkRevisions(space, coll string) string { return "MR#" + space + "#" + coll }
func keyRevision(space, coll string, rev int64) port.Key {
	return port.Key{PK: pkRevisions(space, coll), SK: fmt.Sprintf("%020d", rev)}
}

// pkSourceCollections lists the collections an actor is the source of (one entry per collection, SK = its
// ID), so that the actor's inbox view merges their feeds without scanning the space's collections.
func pkSourceCollections(space, actor string) string { return "AC#" + space + "#" + actor }
func keySourceCollection(space, actor, coll string) port.Key {
	return port.Key{PK: pkSourceCollections(space, actor), SK: coll}
}

// pkCollectionFeed holds a copy of each memory_revision feed item of a collection, so that inbox views of
// its readers merge it with their inbox partition (reads grow with the items returned).
func pkCollectionFeed(space, coll string) string { return "MC#" + space + "#" + coll }
func keyCollectionFeed(space, coll string, seq uint64) port.Key {
	return port.Key{PK: pkCollectionFeed(space, coll), SK: seqSK(seq)}
}

func memoryStateKey(space, coll string, rev int64, attempt string) string {
	return fmt.Sprintf("spaces/%s/collections/%s/states/%020d-%s.json", space, coll, rev, attempt)
}

// Webhook subscriptions and deliveries (RFC §12, docs/storage-keys.md).

func pkSubscriptions(space string) string { return "WS#" + space }
func keySubscription(space, sub string) port.Key {
	return port.Key{PK: pkSubscriptions(space), SK: "S#" + sub}
}

// keyConsumerSubs indexes the subscriptions that count against subscriptions_per_consumer.
func keyConsumerSubs(space, consumer string) port.Key {
	return port.Key{PK: pkSubscriptions(space), SK: "C#" + consumer}
}
func keySubHealth(space, sub string) port.Key { return port.Key{PK: "WH#" + space, SK: sub} }

// pkDispatch holds, per space with subscriptions, the visible_seq up to which the embedded dispatcher
// derived deliveries from the space feed.
const pkDispatch = "WD"

func keyDispatch(space string) port.Key {
	return port.Key{PK: indexShard(pkDispatch, space), SK: space}
}

// keyDispatchUnsharded is where a space's dispatch position was kept before the index was sharded.
func keyDispatchUnsharded(space string) port.Key { return port.Key{PK: pkDispatch, SK: space} }

func pkDeliveries(space string) string { return "DL#" + space }
func keyDelivery(space, delivery string) port.Key {
	return port.Key{PK: pkDeliveries(space), SK: delivery}
}

// pkDue is the durable queue of delivery attempts, ordered by when they are due.
const pkDue = "WQ"

const dueTimeFormat = "20060102T150405.000000000Z"

func keyDue(at time.Time, space, delivery string) port.Key {
	return port.Key{PK: pkDueShard(space, delivery), SK: at.UTC().Format(dueTimeFormat) + "#" + space + "#" + delivery}
}

// pkDueShard is the shard of the due index that holds a delivery's entries.
func pkDueShard(space, delivery string) string { return indexShard(pkDue, space+"#"+delivery) }
