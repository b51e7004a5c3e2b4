package domain

import (
	"container/list"
	"sync"
)

// stateCache keeps recently used collection states. States are immutable objects under unique keys, so a
// cached state never goes stale; the cache only bounds how many parsed states stay in memory.
type stateCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // front = most recent; values are keys
	items map[string]*list.Element
	vals  map[string]memoryState
}

func newStateCache(max int) *stateCache {
	return &stateCache{max: max, order: list.New(), items: map[string]*list.Element{}, vals: map[string]memoryState{}}
}

func (c *stateCache) get(key string) (memoryState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return memoryState{}, false
	}
	c.order.MoveToFront(el)
	return c.vals[key], true
}

func (c *stateCache) put(key string, st memoryState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.items[key] = c.order.PushFront(key)
	c.vals[key] = st
	for c.order.Len() > c.max {
		last := c.order.Back()
		k := last.Value.(string)
		c.order.Remove(last)
		delete(c.items, k)
		delete(c.vals, k)
	}
}
