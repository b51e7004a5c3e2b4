package domain

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// readAheadMax bounds the read-aheads in flight at once, across every consumer: each is one page's read.
const readAheadMax = 4

// readAheadTimeout bounds one read-ahead.
const readAheadTimeout = 10 * time.Second

// readAhead reads, in the background, the page after the one an inbox.read returned, while the consumer
// handles (and usually acknowledges) it: the page's feed items are decoded into the feed cache, and the
// blocks that hold them are in the store's cache when the consumer asks for that page. A read of a
// position whose read-ahead is still running waits for it instead of doing the same work beside it. A
// read-ahead changes nothing that a read returns: it only fills caches whose entries never change (a feed
// item is written once), and the read itself still reads the inbox and the sequence head. Only a process
// that outlives its requests enables it (Config.ReadAhead, the embedded server): a Lambda instance is frozen
// after its response.
type readAhead struct {
	mu       sync.Mutex
	inflight map[readAheadKey]chan struct{}
	closed   bool
	wg       sync.WaitGroup
	ctx      context.Context // cancelled by close
	cancel   context.CancelFunc
	log      *slog.Logger
}

type readAheadKey struct {
	space, consumer string
	pos             uint64
}

func newReadAhead(log *slog.Logger) *readAhead {
	ctx, cancel := context.WithCancel(context.Background())
	return &readAhead{inflight: map[readAheadKey]chan struct{}{}, ctx: ctx, cancel: cancel, log: log}
}

// join waits until no read-ahead of key is running (or ctx ends).
func (a *readAhead) join(ctx context.Context, key readAheadKey) {
	if a == nil {
		return
	}
	a.mu.Lock()
	done, ok := a.inflight[key]
	a.mu.Unlock()
	if !ok {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// start runs read in the background for key, unless one for key is running, readAheadMax are, or the
// service is closed.
func (a *readAhead) start(key readAheadKey, read func(ctx context.Context) error) {
	if a == nil {
		return
	}
	a.mu.Lock()
	if _, busy := a.inflight[key]; busy || a.closed || len(a.inflight) >= readAheadMax {
		a.mu.Unlock()
		return
	}
	done := make(chan struct{})
	a.inflight[key] = done
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		defer func() {
			a.mu.Lock()
			delete(a.inflight, key)
			a.mu.Unlock()
			close(done)
		}()
		ctx, cancel := context.WithTimeout(a.ctx, readAheadTimeout)
		defer cancel()
		if err := read(ctx); err != nil && a.ctx.Err() == nil {
			a.log.Debug("inbox read-ahead failed", "space_id", key.space, "consumer_id", key.consumer, "error", err)
		}
	}()
}

// close stops the read-aheads and waits for them to end.
func (a *readAhead) close() {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
}

// Close ends the service's background work (the inbox read-aheads, Config.ReadAhead) and waits for it; the
// ports it uses may be closed after it returns. The operations keep working, without read-ahead.
func (s *Service) Close() { s.ahead.close() }
