package domain

import "sync"

// consumerCacheMax bounds the consumer records the service keeps decoded.
const consumerCacheMax = 1024

// consumerCache keeps consumer records decoded, with their filter's fingerprint, by the bytes they are stored
// as: the same bytes always decode to the same consumer, so an entry never goes stale, and a consumer whose
// record changed (a new view, filter or revision) is stored as other bytes. A consumer's reads and acks then
// skip the decoding and the fingerprint (JCS and SHA-256) that every one of them would otherwise repeat. The
// entries are shared: nothing modifies a Consumer it got from here.
type consumerCache struct {
	mu      sync.Mutex
	records map[string]cachedConsumer // by stored record bytes
}

// cachedConsumer is a decoded consumer record and the fingerprint of its normalized filter.
type cachedConsumer struct {
	c        Consumer
	filterFP string
}

func newConsumerCache() *consumerCache {
	return &consumerCache{records: make(map[string]cachedConsumer)}
}

// get returns the consumer stored as data, if kept.
func (cc *consumerCache) get(data []byte) (cachedConsumer, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	e, ok := cc.records[string(data)]
	return e, ok
}

// put keeps the consumer stored as data, emptying the cache first when it is full.
func (cc *consumerCache) put(data []byte, e cachedConsumer) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if len(cc.records) >= consumerCacheMax {
		clear(cc.records)
	}
	cc.records[string(data)] = e
}
