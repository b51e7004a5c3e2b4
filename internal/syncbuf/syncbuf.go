// Package syncbuf holds Buffer, a bytes.Buffer safe for concurrent use: tests hand it to a logger or a
// subprocess as its output while they read what was written so far; and List, a slice safe for concurrent
// use, where test fakes record what they were called with while the test takes what was recorded so far.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is an io.Writer, safe for concurrent use, that keeps everything written to it. The zero value is
// ready to use; a Buffer must not be copied after first use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// List is a slice safe for concurrent use: some goroutines Add to it, another takes what they added. The
// zero value is an empty list ready to use; a List must not be copied after first use.
type List[T any] struct {
	mu    sync.Mutex
	items []T
}

// Add appends vs.
func (l *List[T]) Add(vs ...T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = append(l.items, vs...)
}

// Take returns what was added since the last Take (nil if nothing) and empties the list.
func (l *List[T]) Take() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.items
	l.items = nil
	return out
}

// All returns a copy of what the list holds, leaving it as it is.
func (l *List[T]) All() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]T(nil), l.items...)
}
