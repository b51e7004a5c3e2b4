package pebble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A full volume, and the way back from it.
//
// The journal opens a segment only when the volume keeps, besides the segment's file, a reserve of two
// segments free (the memtable's capacity: room for the flush that turns it into tables), so that on a
// filling disk it is the journal that is refused, between two groups, not a flush in the middle of one.
// A group that cannot be made durable — that refusal, or any failed journal write or sync — makes the store
// refuse every commit at once with port.ErrUnavailable (503 STORAGE_UNAVAILABLE), while reads go on from the
// durable view. A recovery loop then checks the volume every RecoverEvery; once it has the room to open a
// segment it repairs the journal (journal.repair: the bytes after the last committed record are cleared and
// synced, the segment sealed, so no replay can apply a group that was answered with the failure), drops the
// committer's cache (it may hold writes of failed groups), and takes commits again. Nothing acknowledged is
// touched: every acknowledged group's record stays in its segment until a flush has put it in tables. A
// process killed during the repair restarts from the journal as after any crash: the cleared bytes were
// never acknowledged.

// Defaults and bounds of the room checks.
const (
	// DefaultRecoverEvery is the default Options.RecoverEvery.
	DefaultRecoverEvery = time.Second
	// minSegmentSize is the smallest journal segment segmentSizeFor chooses.
	minSegmentSize = 1 << 20
	// warnEvery bounds how often a store refusing writes says so, and how often pebble's own error lines
	// are logged (engineLogger).
	warnEvery = 5 * time.Second
	// replayFlushWait bounds the flush of the replayed journal at Open: a volume that cannot take it is
	// refused (NoRoomError) rather than retried for ever before the server listens.
	replayFlushWait = 15 * time.Second
	// sstThrottle is the least time between two attempts to create a table after one failed for want of
	// room: pebble retries a failed flush at once, for ever.
	sstThrottle = time.Second
)

// segmentSizeFor returns the journal segment size on a volume of total bytes: a sixteenth of it, in whole
// MiB, between 1 MiB and 32 MiB (segmentSize). The store's room needs are multiples of it (RoomToStart), so
// a small volume gets small segments rather than a first segment it cannot allocate.
func segmentSizeFor(total uint64) int64 {
	size := int64(total/16) &^ (minSegmentSize - 1)
	return min(max(size, minSegmentSize), segmentSize)
}

// reserveFor is the room the journal keeps free besides a new segment: the memtable's capacity, the most a
// flush writes into tables.
func reserveFor(segSize int64) int64 { return memTableSize(segSize) }

// RoomToStart is the free room the store needs on its volume to open with journal segments of segSize
// bytes, and to take writes again after the volume filled: a segment and the reserve.
func RoomToStart(segSize int64) int64 { return segSize + reserveFor(segSize) }

// NoRoomError refuses a store whose volume has less free room than it needs (RoomToStart).
type NoRoomError struct {
	// Dir is the store's directory.
	Dir string
	// Avail and Total are the volume's free and total bytes (Avail -1 when unknown).
	Avail, Total int64
	// Need is the free room the store needs.
	Need int64
	// Replay is set when the journal of the last run could not be flushed into tables in time.
	Replay bool
}

// Error is one line naming the directory, the room it has and needs, and what to do.
func (e *NoRoomError) Error() string {
	what := fmt.Sprintf("has %s free", bytesText(e.Avail))
	if e.Replay {
		what = fmt.Sprintf("could not take the tables of the journal being replayed within %v (%s free)", replayFlushWait, bytesText(e.Avail))
	}
	return fmt.Sprintf("pebble: open %s: the volume holding it %s; the item store needs at least %s free to start: "+
		"free space on that volume (remove other files there, or grow it) and start again", e.Dir, what, bytesText(e.Need))
}

// Unwrap classifies the refusal as a full disk.
func (e *NoRoomError) Unwrap() error { return syscall.ENOSPC }

// bytesText writes a byte count for people.
func bytesText(n int64) string {
	switch {
	case n < 0:
		return "an unknown amount"
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// Room is what the store knows of its volume.
type Room struct {
	// Dir is the store's directory.
	Dir string
	// AvailBytes and TotalBytes are the volume's free and total bytes (-1 when the file system cannot tell).
	AvailBytes, TotalBytes int64
	// NeedBytes is the free room the store needs to take writes again once they are refused.
	NeedBytes int64
	// WritesRefused is set while the store refuses commits after a failed durable write.
	WritesRefused bool
	// RefusedSince is when it began refusing them (zero while it takes them).
	RefusedSince time.Time
}

// Room reports the volume's free room and whether writes are refused.
func (s *Store) Room() Room {
	r := Room{Dir: s.dir, AvailBytes: -1, TotalBytes: -1, NeedBytes: RoomToStart(s.segSize)}
	if u, err := s.fs.GetDiskUsage(s.dir); err == nil {
		r.AvailBytes, r.TotalBytes = int64(u.AvailBytes), int64(u.TotalBytes)
	}
	if s.failure() != nil {
		r.WritesRefused = true
		if since := s.room.since.Load(); since != nil {
			r.RefusedSince = *since
		}
	}
	return r
}

// roomState is when the store began refusing writes and when it last said so.
type roomState struct {
	since    atomic.Pointer[time.Time]
	lastWarn time.Time // owned by the recovery loop
}

// startRecovery starts the recovery loop (Open).
func (s *Store) startRecovery() {
	s.recoverDone.Add(1)
	go s.recoverLoop()
}

// refused is called once when the store begins refusing writes: it logs why; the recovery loop takes it
// from there.
func (s *Store) refused(err error) {
	now := time.Now()
	s.room.since.Store(&now)
	s.log.Warn("item store: writes refused: a durable write failed", "dir", s.dir, "err", err)
}

// recoverLoop runs from Open to Close. While the store refuses writes it checks the volume every
// recoverEvery and recovers once there is room, saying at most every warnEvery how much room it needs and
// where. (A loop for the store's life rather than one per failure: a failure right after a recovery can
// never find the previous loop on its way out.)
func (s *Store) recoverLoop() {
	defer s.recoverDone.Done()
	tick := time.NewTicker(s.recoverEvery)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		if s.failure() == nil {
			continue
		}
		r := s.Room()
		err := error(nil)
		if r.AvailBytes >= 0 && r.AvailBytes < r.NeedBytes {
			err = fmt.Errorf("%s free, %s needed", bytesText(r.AvailBytes), bytesText(r.NeedBytes))
		} else {
			err = s.recover()
		}
		if err == nil {
			s.log.Info("item store: writes resumed", "dir", s.dir, "refused_for", time.Since(r.RefusedSince).Round(time.Millisecond).String(),
				"avail_bytes", r.AvailBytes)
			continue
		}
		if errors.Is(err, ErrClosed) {
			return
		}
		if time.Since(s.room.lastWarn) >= warnEvery {
			s.room.lastWarn = time.Now()
			s.log.Warn("item store: writes refused until there is room: free space on the volume holding the data directory",
				"dir", s.dir, "avail_bytes", r.AvailBytes, "need_bytes", r.NeedBytes, "reason", err.Error())
		}
	}
}

// recover takes the committer role once nobody holds it and no commit is queued (commits are refused at
// once meanwhile), waits for the last group to be answered, repairs the journal, drops the committer's
// state of failed groups and takes commits again.
func (s *Store) recover() error {
	if s.unapplied.Load() {
		return errors.New("an answered group is not in the memtable: restart the server, which replays it from the journal")
	}
	for {
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			return ErrClosed
		}
		if !s.evaluating && len(s.queue) == 0 {
			s.evaluating = true
			s.mu.Unlock()
			break
		}
		s.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	if s.tail != nil {
		<-s.tail.synced
	}
	err := s.journal.repair(func() {
		if s.afterRepair != nil { // read only once a repair succeeded (tests set it while one is failing)
			s.afterRepair()
		}
	})
	if err == nil {
		for _, g := range s.inflight {
			s.recycleWrites(g.writes)
		}
		s.inflight, s.tail = nil, nil
		clear(s.hot) // it may hold writes of groups that failed
		s.viewMu.Lock()
		clear(s.absent) // the repair may have applied writes of groups that failed
		s.viewMu.Unlock()
		s.room.since.Store(nil)
		s.failed.Store(nil)
	}
	s.mu.Lock()
	if len(s.queue) > 0 {
		close(s.queue[0].promote)
	} else {
		s.evaluating = false
	}
	s.mu.Unlock()
	return err
}

// errFlushAbandoned reports a flush given up before it finished.
var errFlushAbandoned = errors.New("flush abandoned before it finished")

// flushUntil flushes the memtable, giving up when stop closes (pebble keeps retrying a flush that failed
// for want of room, and DB.Flush would wait for ever).
func flushUntil(db *pdb.DB, stop <-chan struct{}) error {
	done, err := db.AsyncFlush()
	if err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-stop:
		return errFlushAbandoned
	}
}

// timeout returns a channel closed after d.
func timeout(d time.Duration) <-chan struct{} {
	c := make(chan struct{})
	time.AfterFunc(d, func() { close(c) })
	return c
}

// throttleFS is the store's file system: after a write failed for want of room, the next table (.sst) is
// created no sooner than sstThrottle later, so that pebble's immediate retries of a failed flush or
// compaction run once a second rather than in a busy loop.
type throttleFS struct {
	vfs.FS
	mu      sync.Mutex
	noSpace time.Time // the last write refused with ENOSPC
}

func (t *throttleFS) noted(err error) error {
	if err != nil && errors.Is(err, syscall.ENOSPC) {
		t.mu.Lock()
		t.noSpace = time.Now()
		t.mu.Unlock()
	}
	return err
}

// Create creates a file, waiting first when it is a table and the last write was refused for want of room.
func (t *throttleFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if strings.HasSuffix(name, ".sst") {
		t.mu.Lock()
		wait := sstThrottle - time.Since(t.noSpace)
		t.mu.Unlock()
		if wait > 0 && wait <= sstThrottle {
			time.Sleep(wait)
		}
	}
	f, err := t.FS.Create(name, category)
	if err != nil {
		return nil, t.noted(err)
	}
	return &throttleFile{File: f, fs: t}, nil
}

// Unwrap returns the file system throttleFS wraps.
func (t *throttleFS) Unwrap() vfs.FS { return t.FS }

// throttleFile notes the writes refused for want of room.
type throttleFile struct {
	vfs.File
	fs *throttleFS
}

func (f *throttleFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, f.fs.noted(err)
}

func (f *throttleFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, f.fs.noted(err)
}

func (f *throttleFile) Sync() error { return f.fs.noted(f.File.Sync()) }

func (f *throttleFile) SyncData() error { return f.fs.noted(f.File.SyncData()) }

// engineLogger passes pebble's messages to slog: informational ones at debug level, errors at most once
// every warnEvery (pebble retries a flush that failed for want of room at once, and logs every attempt),
// with the count of those left out since the last one.
type engineLogger struct {
	log        *slog.Logger
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func newEngineLogger(log *slog.Logger) *engineLogger { return &engineLogger{log: log} }

func (l *engineLogger) Infof(format string, args ...any) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug("item store: " + fmt.Sprintf(format, args...))
	}
}

func (l *engineLogger) Errorf(format string, args ...any) {
	l.mu.Lock()
	if time.Since(l.last) < warnEvery {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	n := l.suppressed
	l.last, l.suppressed = time.Now(), 0
	l.mu.Unlock()
	l.log.Error("item store: "+fmt.Sprintf(format, args...), "similar_lines_left_out", n)
}

// Fatalf logs and panics: pebble calls it when it cannot go on safely.
func (l *engineLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error("item store: fatal: " + msg)
	panic("pebble: " + msg)
}
