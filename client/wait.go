package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/waypost/waypost/domain"
)

// waitMargin is how much longer than the requested long poll one feed.wait exchange may take.
const waitMargin = 15 * time.Second

// WaitFeed long-polls a consumer's feed (GET /v0/feed/wait, feed.wait, capability live_feed): it returns
// as soon as an item visible to the consumer commits after req.Cursor (nil: the beginning of the retained
// history), or a page without items when req.TimeoutMS passes. The page has the inbox.read shape; nothing is
// acknowledged. req.TimeoutMS must be at most describe's limits.feed_wait_max_ms; the HTTP exchange is
// allowed that long plus a margin even when the client timeout is shorter.
func (c *Client) WaitFeed(ctx context.Context, req domain.WaitRequest) (domain.Page, error) {
	q := url.Values{"consumer_id": {req.ConsumerID}, "timeout_ms": {strconv.Itoa(req.TimeoutMS)}}
	if req.Cursor != nil && *req.Cursor != "" {
		q.Set("cursor", *req.Cursor)
	}
	if req.Limit != 0 {
		q.Set("limit", strconv.Itoa(req.Limit))
	}
	t := c.t.withTimeout(time.Duration(req.TimeoutMS)*time.Millisecond + waitMargin)
	return callList(ctx, t, http.MethodGet, "/v0/feed/wait", q, nil, pageItems)
}
