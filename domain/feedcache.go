package domain

import "sync"

// feedCacheMax bounds the decoded feed items the service keeps.
const feedCacheMax = 8192

// feedCache keeps recently decoded feed items by space and visible_seq. A feed item is written once (its
// key is guarded by NotExists) and never changed, and every inbox, feed and collection-feed copy of it holds
// the same record, so an item decoded while reading a page is exactly what inbox.ack would decode again for
// the same item. Items are shared: callers must not modify them.
type feedCache struct {
	mu    sync.Mutex
	items map[feedCacheKey]FeedItem
}

type feedCacheKey struct {
	space, seq string
}

func newFeedCache() *feedCache { return &feedCache{items: make(map[feedCacheKey]FeedItem)} }

func (c *feedCache) get(space, seq string) (FeedItem, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fi, ok := c.items[feedCacheKey{space, seq}]
	return fi, ok
}

func (c *feedCache) put(fi FeedItem) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.items) >= feedCacheMax {
		clear(c.items) // a miss only costs a read and a decode
	}
	c.items[feedCacheKey{fi.SpaceID, fi.VisibleSeq}] = fi
}
