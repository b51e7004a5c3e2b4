package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/waypost/waypost/client"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/wait"
)

// Waiter is the long poll Follow waits with (feed.wait); *client.Client implements it.
type Waiter interface {
	WaitFeed(ctx context.Context, req domain.WaitRequest) (domain.Page, error)
}

var _ Waiter = (*client.Client)(nil)

// FollowOptions configure Follow. Zero values take the defaults.
type FollowOptions struct {
	// Limit is the page size of each Fetch (0: the service's inbox_page_default).
	Limit int
	// Wait is how long one feed.wait long poll lasts (default 25 s; at most describe's feed_wait_max_ms).
	Wait time.Duration
	// PollInterval is how often Follow fetches when the deployment has no feed.wait (UNSUPPORTED);
	// default 5 s.
	PollInterval time.Duration
	// MaxBackoff bounds the delay before trying again after a retryable failure (transport failure or a
	// service error marked retryable); the delay starts at 500 ms and doubles. Default 30 s.
	MaxBackoff time.Duration
	// OnRetry, when set, is told about each retryable failure before Follow waits and tries again.
	OnRetry func(err error, delay time.Duration)
}

func (o FollowOptions) withDefaults() FollowOptions {
	if o.Wait <= 0 {
		o.Wait = 25 * time.Second
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 5 * time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	return o
}

// Follow keeps the queue up to date until ctx ends, then returns nil. It repeats: Fetch pages until the
// feed has no more (each page is saved locally before it is acknowledged, exactly as Fetch does), hand the
// new items to handle, then long-poll feed.wait from the queue's cursor until something visible commits.
//
// feed.wait only wakes Follow up: the items it returns are ignored and read again through Fetch, so every
// item handle sees has been saved in the queue first, and Follow keeps every guarantee of Fetch (nothing
// lost or shown twice across crashes, de-duplication by item_id, resynchronization after a view change).
// When the deployment has no feed.wait, Follow fetches every PollInterval instead.
//
// handle is called with the items of each page that are new to the queue, in feed order; they stay pending
// until MarkProcessed. An error from handle stops Follow and is returned (the items stay pending). Retryable
// failures are retried with backoff; any other failure of the service stops Follow and is returned.
func (q *Queue) Follow(ctx context.Context, w Waiter, opts FollowOptions, handle func(ctx context.Context, items []domain.FeedItem) error) error {
	opts = opts.withDefaults()
	backoff := time.Duration(0)
	retry := func(err error) error {
		if !client.IsRetryable(err) {
			return err
		}
		backoff = min(max(2*backoff, 500*time.Millisecond), opts.MaxBackoff)
		if opts.OnRetry != nil {
			opts.OnRetry(err, backoff)
		}
		return wait.Sleep(ctx, backoff)
	}
	polling := false
	for {
		// Drain: every page up to the head of the feed.
		for {
			if ctx.Err() != nil {
				return nil
			}
			res, err := q.Fetch(ctx, opts.Limit)
			if len(res.New) > 0 { // saved in the queue even when acknowledging them failed
				if herr := handle(ctx, res.New); herr != nil {
					return herr
				}
			}
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if rerr := retry(err); rerr != nil {
					if ctx.Err() != nil {
						return nil
					}
					return rerr
				}
				continue
			}
			backoff = 0
			if !res.HasMore {
				break
			}
		}
		// Wait for something new.
		if polling {
			if wait.Sleep(ctx, opts.PollInterval) != nil {
				return nil
			}
			continue
		}
		cursor, err := q.cursor()
		if err != nil {
			return err
		}
		_, err = w.WaitFeed(ctx, domain.WaitRequest{ConsumerID: q.consumerID, Cursor: cursor, TimeoutMS: int(opts.Wait / time.Millisecond), Limit: 1})
		switch {
		case err == nil:
			backoff = 0
		case ctx.Err() != nil:
			return nil
		case client.IsCode(err, domain.CodeUnsupported):
			polling = true
		case client.IsCode(err, domain.CodeCursorScopeChanged, domain.CodeInvalidCursor, domain.CodeCursorExpired):
			// The queue's cursor no longer fits: Fetch resynchronizes (or reports why it cannot).
		default:
			if rerr := retry(err); rerr != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("queue: waiting for new items of %s: %w", q.consumerID, rerr)
			}
		}
	}
}

// cursor returns the queue's read position (nil before the first read).
func (q *Queue) cursor() (*string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	c, err := q.meta(kCursor)
	if err != nil || c == nil {
		return nil, err
	}
	s := string(c)
	return &s, nil
}
