package domaintest

import (
	"cmp"
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/waypost/waypost/domain/port"
)

// Recorder wraps a backend and remembers every item key a committed transaction put and every object
// key the blob store stored, so that a test can check, whatever the adapter, that an operation removed
// everything it should (space deletion) without listing the store; and the committed transactions
// themselves, for tests of what an operation writes.
type Recorder struct {
	mu      sync.Mutex
	keys    map[port.Key]bool
	objects map[string]bool
	txs     []CommittedTx
}

// CommittedTx is a transaction that committed: its sequence (nil without one) and the ops its Build returned
// for the committing attempt.
type CommittedTx struct {
	Seq *port.Sequence
	Ops []port.Op
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{keys: map[port.Key]bool{}, objects: map[string]bool{}}
}

// Wrap returns the backend with both ports recording into r.
func (r *Recorder) Wrap(b Backend) Backend {
	blobs := &recordingBlobs{BlobStore: b.Blobs, r: r}
	store := &recordingStore{ItemStore: b.Store, r: r}
	ps, presigns := b.Blobs.(port.BlobPresigner)
	st, streams := b.Blobs.(port.BlobStreamer)
	if presigns && streams {
		return Backend{Store: store, Blobs: recordingDirect{recordingBlobs: blobs, ps: ps, st: st}}
	}
	return Backend{Store: store, Blobs: blobs}
}

// Keys returns the item keys put so far, sorted by partition and sort key.
func (r *Recorder) Keys() []port.Key {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]port.Key, 0, len(r.keys))
	for k := range r.keys {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b port.Key) int {
		return cmp.Or(strings.Compare(a.PK, b.PK), strings.Compare(a.SK, b.SK))
	})
	return out
}

// Txs returns the transactions committed so far, in the order they committed.
func (r *Recorder) Txs() []CommittedTx {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.txs)
}

// Objects returns the object keys stored so far, sorted.
func (r *Recorder) Objects() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.objects))
	for k := range r.objects {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

type recordingStore struct {
	port.ItemStore
	r *Recorder
}

func (s *recordingStore) Commit(ctx context.Context, tx port.Tx) (uint64, error) {
	var last []port.Op
	build := tx.Build
	tx.Build = func(first uint64) ([]port.Op, error) {
		ops, err := build(first)
		last = ops
		return ops, err
	}
	first, err := s.ItemStore.Commit(ctx, tx)
	if err == nil {
		s.r.mu.Lock()
		if tx.Counter != nil {
			s.r.keys[*tx.Counter] = true
		}
		if tx.Seq != nil {
			s.r.keys[tx.Seq.Counter] = true
		}
		for _, op := range last {
			if op.Kind == port.OpPut {
				s.r.keys[op.Item.Key] = true
			}
		}
		s.r.txs = append(s.r.txs, CommittedTx{Seq: tx.Seq, Ops: last})
		s.r.mu.Unlock()
	}
	return first, err
}

type recordingBlobs struct {
	port.BlobStore
	r *Recorder
}

func (b *recordingBlobs) Put(ctx context.Context, key string, size int64, sha256 string, rd io.Reader) (port.BlobInfo, error) {
	info, err := b.BlobStore.Put(ctx, key, size, sha256, rd)
	if err == nil {
		b.r.mu.Lock()
		b.r.objects[key] = true
		b.r.mu.Unlock()
	}
	return info, err
}

// recordingDirect is recordingBlobs over a store that also presigns and streams (S3): presigned puts
// are recorded when they are signed (the object may arrive later, straight from the client).
type recordingDirect struct {
	*recordingBlobs
	ps port.BlobPresigner
	st port.BlobStreamer
}

func (b recordingDirect) PresignPut(ctx context.Context, key string, size int64, sha256, contentType string, expires time.Time) (port.PresignedRequest, error) {
	b.r.mu.Lock()
	b.r.objects[key] = true
	b.r.mu.Unlock()
	return b.ps.PresignPut(ctx, key, size, sha256, contentType, expires)
}

func (b recordingDirect) PresignGet(ctx context.Context, key, contentType, filename string, expires time.Time) (port.PresignedRequest, error) {
	return b.ps.PresignGet(ctx, key, contentType, filename, expires)
}

func (b recordingDirect) PutStream(ctx context.Context, key, contentType string, r io.Reader) (int64, error) {
	b.r.mu.Lock()
	b.r.objects[key] = true
	b.r.mu.Unlock()
	return b.st.PutStream(ctx, key, contentType, r)
}
