package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waypost/waypost/api/httpapi"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/shedlog"
)

// Connection bounds of `waypost serve` (Config.MaxConnections).
const (
	// DefaultMaxConnections bounds the open client connections (idle keep-alive ones and long polls
	// included) unless the process's descriptor limit is lower (see ConnectionBudget).
	DefaultMaxConnections = 16384
	// maxRejecting bounds the connections being answered 429 at the same time; beyond it an excess
	// connection is closed without an answer.
	maxRejecting = 256
	// rejectLinger bounds how long a refused connection is kept to deliver its answer.
	rejectLinger = time.Second
)

// ConnectionBudget returns the connection bound for a wanted one under a descriptor limit (RLIMIT_NOFILE):
// the wanted bound, lowered so that at least max(64, limit/8) descriptors stay free for the store, blob
// files and webhook deliveries. A limit of 0 (unknown) leaves the wanted bound.
func ConnectionBudget(wanted int, nofile uint64) int {
	if nofile == 0 {
		return wanted
	}
	reserve := max(64, nofile/8)
	if nofile <= reserve {
		return 1
	}
	return int(min(uint64(wanted), nofile-reserve))
}

// connLimiter is a net.Listener that keeps at most max connections open. An excess connection is answered
// at once — HTTP 429 with Retry-After and the RFC §5.2 envelope of RATE_LIMITED — and closed, never left
// waiting in the accept queue.
type connLimiter struct {
	net.Listener
	max       int64
	active    atomic.Int64
	rejecting atomic.Int64
	ids       port.IDSource
	shed      *shedlog.Reporter
	wg        sync.WaitGroup // refusals in progress
}

func newConnLimiter(ln net.Listener, max int, ids port.IDSource, shed *shedlog.Reporter) *connLimiter {
	return &connLimiter{Listener: ln, max: int64(max), ids: ids, shed: shed}
}

// Accept returns the next connection within the bound, refusing those above it.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.active.Add(1); n > l.max {
			l.active.Add(-1)
			l.shed.Shed(context.Background(), n-1)
			l.refuse(c)
			continue
		}
		return &limitedConn{Conn: c, l: l}, nil
	}
}

// Active returns the open connections and the bound.
func (l *connLimiter) Active() (current, max int64) { return l.active.Load(), l.max }

// refuse answers a connection over the bound and closes it, without blocking Accept.
func (l *connLimiter) refuse(c net.Conn) {
	if l.rejecting.Add(1) > maxRejecting {
		l.rejecting.Add(-1)
		_ = c.Close()
		return
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer l.rejecting.Add(-1)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(rejectLinger))
		if _, err := c.Write(refusal(l.ids.NewID("rq"), l.max)); err != nil {
			return
		}
		// Lingering close: stop sending, then drain what the client sent, so that closing does not reset
		// the connection before the client read the answer.
		if tc, ok := c.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}()
}

// wait waits for the refusals in progress (after the listener closed).
func (l *connLimiter) wait() { l.wg.Wait() }

// refusal is the whole HTTP/1.1 answer to a connection over the bound.
func refusal(requestID string, max int64) []byte {
	de := domain.Errorf(domain.CodeRateLimited, "the server has %d connections open, its limit; retry after Retry-After", max).
		WithDetails("reason", "server_busy", "limit", "max_connections", "retry_after_ms", 1000)
	wire := de.Wire()
	body, _ := json.Marshal(httpapi.Envelope{OK: false, RequestID: requestID, Error: &wire})
	body = append(body, '\n')
	head := fmt.Sprintf("HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json; charset=utf-8\r\n"+
		"Cache-Control: no-store\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n", len(body))
	return append([]byte(head), body...)
}

// limitedConn releases its place under the bound when it closes.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once
}

// Close closes the connection and releases its place.
func (c *limitedConn) Close() error {
	c.once.Do(func() { c.l.active.Add(-1) })
	return c.Conn.Close()
}
