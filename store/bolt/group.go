package bolt

import (
	"errors"
	"sync"

	"go.etcd.io/bbolt"
)

// groupCommitter groups concurrent commits into one bbolt write transaction (one fsync) without a timer:
// a commit that arrives while a batch is being written and synced waits, and the next batch takes every
// commit that queued up meanwhile. A lone commit therefore pays one transaction, and under load the batch
// size adapts to the sync time. The leader of a batch hands leadership to the first waiter when it is done,
// so no goroutine keeps committing for others.
type groupCommitter struct {
	db  *bbolt.DB
	max int

	mu      sync.Mutex
	queue   []*groupCommit
	leading bool
}

// groupCommit is one caller's commit. fn applies it inside the shared transaction and reports whether it
// wrote anything; an error with nothing written is the caller's own outcome and leaves the batch intact.
type groupCommit struct {
	fn       func(*bbolt.Tx) (wrote bool, err error)
	own      error // the commit's own outcome (condition failure, invalid transaction, …)
	storage  error // the batch's storage failure
	panicked any   // a panic raised by fn, re-raised in the caller's goroutine
	done     chan struct{}
	promote  chan struct{}
}

// call runs fn, turning a panic into a rollback of the shared transaction; the panic is re-raised by do in
// the goroutine of the commit that caused it.
func (c *groupCommit) call(tx *bbolt.Tx) (wrote bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.panicked, wrote, err = r, true, errPanicked
		}
	}()
	return c.fn(tx)
}

// errPartial aborts a shared transaction in which one commit failed after writing.
var errPartial = errors.New("partial write")

// errPanicked marks a commit whose function panicked.
var errPanicked = errors.New("commit function panicked")

func (g *groupCommitter) do(fn func(*bbolt.Tx) (bool, error)) (own, storage error) {
	c := &groupCommit{fn: fn, done: make(chan struct{}), promote: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if g.leading {
		g.mu.Unlock()
		select {
		case <-c.done:
			return c.result()
		case <-c.promote: // we lead the next batch; c is at the head of the queue
			g.mu.Lock()
		}
	}
	g.leading = true
	n := min(len(g.queue), g.max)
	batch := append([]*groupCommit(nil), g.queue[:n]...)
	g.queue = g.queue[n:]
	g.mu.Unlock()

	g.run(batch)

	g.mu.Lock()
	if len(g.queue) > 0 {
		close(g.queue[0].promote)
	} else {
		g.leading = false
	}
	g.mu.Unlock()
	return c.result()
}

func (c *groupCommit) result() (own, storage error) {
	if c.panicked != nil {
		panic(c.panicked)
	}
	return c.own, c.storage
}

// run writes one batch in one transaction. If a commit failed after writing, the transaction is rolled back
// and every commit of the batch runs again in a transaction of its own, so one failure never takes down the
// others.
func (g *groupCommitter) run(batch []*groupCommit) {
	defer func() {
		for _, c := range batch {
			close(c.done)
		}
	}()
	err := g.db.Update(func(tx *bbolt.Tx) error {
		for _, c := range batch {
			wrote, err := c.call(tx)
			c.own = nil
			if err != nil {
				if wrote {
					return errPartial
				}
				c.own = err
			}
		}
		return nil
	})
	if err == nil {
		return
	}
	if !errors.Is(err, errPartial) {
		for _, c := range batch {
			c.own, c.storage = nil, err
		}
		return
	}
	for _, c := range batch {
		c.own, c.storage, c.panicked = nil, nil, nil
		err := g.db.Update(func(tx *bbolt.Tx) error {
			wrote, err := c.call(tx)
			if err != nil && wrote {
				return err // roll back this commit's partial writes
			}
			c.own = err
			return nil
		})
		if err != nil {
			c.storage = err
		}
	}
}
