// Package syncbuf holds Buffer, a bytes.Buffer safe for concurrent use: tests hand it to a logger or a
// subprocess as its output while they read what was written so far.
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
