package domain

import (
	"sync"
	"time"
)

// authCacheMax bounds the credentials and spaces the service keeps in memory.
const authCacheMax = 4096

// authEntry is what authentication read for one token digest: the token record, the actor's active grants,
// and the actor's authorization generation read before both. Every change that can alter them — revoking
// or rotating the token, revoking the actor, creating or revoking a grant — increments that generation in
// the same commit (actorWrite), so while the actor still has generation gen, the entry is exactly what a
// fresh read would return.
type authEntry struct {
	tok    Token
	grants []Grant
	gen    int64
}

// authCache keeps the authentication of recently used tokens, so that a hot token costs one read (the
// actor's generation) instead of a token read, an actor read and a grant query with their decoding. It also
// keeps space records for at most spaceCacheTTL: the owner can change a space (its rate limits), and another
// process (a Lambda instance) learns of the change when its entry expires; the changing process replaces its
// entry at once. The zero value is not usable: use newAuthCache.
type authCache struct {
	mu     sync.Mutex
	tokens map[string]*authEntry  // by token digest
	spaces map[string]cachedSpace // by space ID
}

// cachedSpace is a space record and when it was read.
type cachedSpace struct {
	sp   Space
	read time.Time
}

// spaceCacheTTL bounds how long a process serves a space record it read before reading it again.
const spaceCacheTTL = 10 * time.Second

func newAuthCache() *authCache {
	return &authCache{tokens: make(map[string]*authEntry), spaces: make(map[string]cachedSpace)}
}

func (c *authCache) token(digest string) *authEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tokens[digest]
}

func (c *authCache) putToken(digest string, e *authEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.tokens[digest]; !ok && len(c.tokens) >= authCacheMax {
		for k := range c.tokens { // drop an arbitrary entry: a miss only costs a fresh read
			delete(c.tokens, k)
			break
		}
	}
	c.tokens[digest] = e
}

func (c *authCache) dropToken(digest string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.tokens, digest)
}

// space returns the cached record of space id if it was read less than spaceCacheTTL before now.
func (c *authCache) space(id string, now time.Time) (Space, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.spaces[id]
	if !ok || now.Before(e.read) || now.Sub(e.read) >= spaceCacheTTL {
		return Space{}, false
	}
	return e.sp, true
}

// putSpace caches sp as read at now.
func (c *authCache) putSpace(sp Space, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.spaces[sp.SpaceID]; !ok && len(c.spaces) >= authCacheMax {
		for k := range c.spaces {
			delete(c.spaces, k)
			break
		}
	}
	c.spaces[sp.SpaceID] = cachedSpace{sp: sp, read: now}
}
