package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/waypost/waypost/internal/dirsync"
)

// The journal is the store's write-ahead log, written in place of pebble's own (which the store disables):
// the caller that makes a group durable appends the group's batch to it and fsyncs it itself, instead of
// handing the write to pebble's log-writer goroutine and waiting to be woken. A lone commit thus makes no
// goroutine hand-off between its evaluation and its answer (docs/decisions.md).
//
// The journal is a sequence of numbered segment files in the journal folder of the store, "<n>.log". A
// segment is a run of records
//
//	crc32c(rest) (4 bytes) ‖ len(batch) (4 bytes) ‖ n (8 bytes) ‖ batch
//
// (little endian; the CRC covers the length, the segment number and the batch), one per group, where batch
// is pebble's batch representation. Replay reads each segment up to its first record that is incomplete, has
// a bad CRC or carries another segment's number: a torn write at the end, the zeros of an unused file, or
// the records of the segment the file held before it was recycled.
//
// Segment files are written in place, never appended to: a new file is filled with zeros and synced before
// its first record, and the files of old segments are reused. Writing inside a file whose blocks are
// allocated and written makes each fdatasync write the data alone; appending (or writing into preallocated
// but unwritten blocks) also journals the file system's metadata, about 25–45 µs more per sync here.
//
// A segment is sealed when the next group's record does not fit (segmentSize); its batches are all in the
// memtable by then, so once the journal's background flusher has flushed the memtable (pebble's Flush writes
// and syncs the tables) the segment is no longer needed: it is renamed "<n>.spare", to be the file of a later
// segment, or removed when a spare is already kept. Open replays every "<n>.log" in order, flushes and
// recycles them. Replaying a batch that a flush had already made durable is harmless: the batches hold sets
// and deletes only, so applying a segment's batches again, in order, before the later ones, ends in the same
// state. Segment numbers only grow (the next is one more than any file's in the folder), so a recycled file
// can never pass its old records off as the new segment's.
type journal struct {
	dir     string
	noSync  bool  // Options.NoSync: no fsync, and new files are not filled
	segSize int64 // a segment is sealed before a record would take it past this size
	flush   func() error
	log     *slog.Logger

	// Owned by the caller making a group durable (one at a time, in order).
	f    *os.File // nil until the first record: a store only read (a backup being verified) writes no journal
	num  uint64   // f's segment number, or the first segment's before it is opened
	off  int64    // the end of f's last record
	rec  []byte   // the record being written, reused
	werr error    // set once a write or sync failed: the journal takes nothing more

	mu     sync.Mutex // guards spare, sealed and opened
	spare  uint64     // the number of the spare file, 0 when there is none
	sealed []uint64   // sealed segments not yet recycled, oldest first
	opened uint64     // the newest segment opened, 0 before the first

	flushReq chan struct{} // wakes the flusher: a segment was sealed or opened
	stopped  chan struct{} // closed when the flusher has returned
}

const (
	journalFolder = "journal"
	// segmentSize is the default journal segment size. Sealing a segment flushes the memtable, whose
	// capacity is twice this (memTableSize), so that it is the journal, not a full memtable, that decides
	// every flush: one per segment.
	segmentSize  = 32 << 20
	recordHeader = 16
	zeroChunk    = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errJournalFailed reports a journal that took a failed write or sync.
var errJournalFailed = errors.New("journal: an earlier write or sync failed")

// openJournal replays the journal in storeDir into the database through apply, makes what it replayed
// durable with flush, and opens a new segment for what follows. The flusher runs until close.
func openJournal(storeDir string, segSize int64, noSync bool, log *slog.Logger, apply func(batch []byte) error,
	flush func() error) (*journal, error) {
	j := &journal{dir: filepath.Join(storeDir, journalFolder), noSync: noSync, segSize: segSize, flush: flush, log: log,
		flushReq: make(chan struct{}, 1), stopped: make(chan struct{})}
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	// The folder's own entry in the store's directory: until that directory is synced, a power loss may take
	// the folder, and every segment in it, however synced the segments are. pebble syncs the directory
	// when it writes tables, but the first segment's records are acknowledged long before that.
	if !noSync {
		if err := dirsync.Sync(storeDir); err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
	}
	logs, spares, err := j.list()
	if err != nil {
		return nil, err
	}
	for _, n := range logs {
		if err := j.replay(n, apply); err != nil {
			return nil, err
		}
	}
	if len(logs) > 0 {
		if err := flush(); err != nil {
			return nil, fmt.Errorf("journal: flush after replay: %w", mapErr(err))
		}
	}
	last := uint64(0)
	for _, n := range append(slices.Clone(logs), spares...) {
		last = max(last, n)
	}
	// Keep the newest file as the spare (it holds the highest number, so the numbers keep growing even when
	// nothing else is left), remove the others.
	j.spare = 0
	for _, n := range spares {
		if n != last {
			if err := os.Remove(j.sparePath(n)); err != nil {
				return nil, fmt.Errorf("journal: %w", err)
			}
		}
	}
	for _, n := range logs {
		if n != last {
			if err := os.Remove(j.logPath(n)); err != nil {
				return nil, fmt.Errorf("journal: %w", err)
			}
		}
	}
	switch {
	case slices.Contains(logs, last):
		if err := os.Rename(j.logPath(last), j.sparePath(last)); err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		j.spare = last
	case last != 0:
		j.spare = last
	}
	if err := j.syncFolder(len(logs)+len(spares) > 0); err != nil {
		return nil, err
	}
	j.num = last + 1
	go j.flusher()
	return j, nil
}

// list returns the numbers of the segment files and of the spare files in the folder, in order.
func (j *journal) list() (logs, spares []uint64, err error) {
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		base, ext, _ := strings.Cut(name, ".")
		n, perr := strconv.ParseUint(base, 10, 64)
		if perr != nil || n == 0 || (ext != "log" && ext != "spare") {
			return nil, nil, fmt.Errorf("journal: unexpected file %s in %s", name, j.dir)
		}
		if ext == "log" {
			logs = append(logs, n)
		} else {
			spares = append(spares, n)
		}
	}
	slices.Sort(logs)
	slices.Sort(spares)
	return logs, spares, nil
}

func (j *journal) logPath(n uint64) string { return filepath.Join(j.dir, fmt.Sprintf("%020d.log", n)) }
func (j *journal) sparePath(n uint64) string {
	return filepath.Join(j.dir, fmt.Sprintf("%020d.spare", n))
}

// replay applies segment n's records in order.
func (j *journal) replay(n uint64, apply func([]byte) error) error {
	data, err := os.ReadFile(j.logPath(n))
	if err != nil {
		return fmt.Errorf("journal: replay: %w", mapErr(err))
	}
	for off := 0; ; {
		batch, next, ok := parseRecord(data, off, n)
		if !ok {
			return nil
		}
		if err := apply(batch); err != nil {
			return fmt.Errorf("journal: replay segment %d at %d: %w", n, off, err)
		}
		off = next
	}
}

// parseRecord reads the record of segment n at off in data: its batch and the offset after it, or ok false
// where the segment's records end.
func parseRecord(data []byte, off int, n uint64) (batch []byte, next int, ok bool) {
	if off < 0 || len(data)-off < recordHeader {
		return nil, 0, false
	}
	h := data[off : off+recordHeader]
	size := int(binary.LittleEndian.Uint32(h[4:8]))
	if size == 0 || binary.LittleEndian.Uint64(h[8:16]) != n || size > len(data)-off-recordHeader {
		return nil, 0, false
	}
	end := off + recordHeader + size
	if crc32.Checksum(data[off+4:end], castagnoli) != binary.LittleEndian.Uint32(h[0:4]) {
		return nil, 0, false
	}
	return data[off+recordHeader : end], end, true
}

// appendRecord appends the record of batch for segment n to dst.
func appendRecord(dst []byte, n uint64, batch []byte) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(batch)))
	dst = binary.LittleEndian.AppendUint64(dst, n)
	dst = append(dst, batch...)
	binary.LittleEndian.PutUint32(dst[start:], crc32.Checksum(dst[start+4:], castagnoli))
	return dst
}

// open makes segment n the one written: the spare file renamed, or a new file filled with zeros, synced
// together with the folder before any record of n is acknowledged.
func (j *journal) open(n uint64) error {
	j.mu.Lock()
	spare := j.spare
	j.spare = 0
	j.mu.Unlock()
	path := j.logPath(n)
	var f *os.File
	var err error
	if spare != 0 {
		if err = os.Rename(j.sparePath(spare), path); err == nil {
			f, err = os.OpenFile(path, os.O_RDWR, 0)
		}
	} else {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil && !j.noSync {
			err = fill(f, j.segSize)
		}
	}
	if err == nil && !j.noSync {
		err = dirsync.Sync(j.dir)
	}
	if err != nil {
		if f != nil {
			_ = f.Close()
		}
		return fmt.Errorf("journal: open segment %d: %w", n, mapErr(err))
	}
	j.f, j.num, j.off = f, n, 0
	j.mu.Lock()
	j.opened = n
	j.mu.Unlock()
	j.wake()
	return nil
}

// wake tells the flusher there is work: a sealed segment, or a spare file to prepare.
func (j *journal) wake() {
	select {
	case j.flushReq <- struct{}{}:
	default: // the flusher is already due to run
	}
}

// fill writes size zero bytes into f and syncs it.
func fill(f *os.File, size int64) error {
	zeros := make([]byte, min(size, zeroChunk))
	for off := int64(0); off < size; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off); err != nil {
			return err
		}
	}
	return syncData(f)
}

// append writes batch as the next record (not synced: see sync), first sealing the segment when the record
// would take it past segSize. After a failed write the journal takes nothing more: the file may hold a torn
// record, after which a later record would not be replayed.
func (j *journal) append(batch []byte) error {
	if j.werr != nil {
		return j.werr
	}
	if j.f == nil {
		if err := j.open(j.num); err != nil {
			return j.broken(err)
		}
	}
	if j.off > 0 && j.off+recordHeader+int64(len(batch)) > j.segSize {
		if err := j.seal(); err != nil {
			return j.broken(err)
		}
	}
	j.rec = appendRecord(j.rec[:0], j.num, batch)
	if _, err := j.f.WriteAt(j.rec, j.off); err != nil {
		return j.broken(fmt.Errorf("journal: write: %w", mapErr(err)))
	}
	j.off += int64(len(j.rec))
	if cap(j.rec) > 4*zeroChunk {
		j.rec = nil // a huge group's record is not kept
	}
	return nil
}

// sync makes the records written so far durable.
func (j *journal) sync() error {
	if j.werr != nil {
		return j.werr
	}
	if j.noSync {
		return nil
	}
	if err := syncData(j.f); err != nil {
		return j.broken(fmt.Errorf("journal: sync: %w", mapErr(err)))
	}
	return nil
}

// broken records err as the failure after which the journal takes nothing more, and returns it.
func (j *journal) broken(err error) error {
	j.werr = fmt.Errorf("%w: %w", errJournalFailed, err)
	return err
}

// seal closes the current segment, hands it to the flusher and opens the next. Every record of the
// segment was synced by the group that wrote it, before this group's append.
func (j *journal) seal() error {
	if err := j.f.Close(); err != nil {
		return fmt.Errorf("journal: close segment %d: %w", j.num, mapErr(err))
	}
	old := j.num
	j.f = nil
	j.mu.Lock()
	j.sealed = append(j.sealed, old)
	j.mu.Unlock()
	return j.open(old + 1) // wakes the flusher
}

// flusher, until close, flushes the memtable after segments are sealed and recycles them, and prepares a
// spare file whenever a segment is open and there is none.
func (j *journal) flusher() {
	defer close(j.stopped)
	for range j.flushReq {
		j.mu.Lock()
		sealed := slices.Clone(j.sealed)
		j.mu.Unlock()
		if len(sealed) > 0 {
			err := j.flush()
			if err == nil {
				err = j.recycle(sealed)
			}
			if err != nil {
				// Nothing is lost: the segments stay, are retried after the next seal and replayed by Open.
				j.log.Error("item store: journal: recycling sealed segments failed", "err", err)
			}
		}
		if err := j.prepareSpare(); err != nil {
			j.log.Error("item store: journal: preparing a spare segment file failed", "err", err)
		}
	}
}

// prepareSpare fills a spare file with zeros when a segment is open and there is no spare (a new store), so
// that sealing the first segment does not wait for one to be filled. The file is named after the newest
// segment opened: spare files are never replayed, and later segments' numbers are larger.
func (j *journal) prepareSpare() error {
	j.mu.Lock()
	n, has := j.opened, j.spare != 0
	j.mu.Unlock()
	if has || n == 0 || j.noSync {
		return nil
	}
	f, err := os.OpenFile(j.sparePath(n), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = fill(f, j.segSize)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Join(err, os.Remove(j.sparePath(n)))
	}
	j.mu.Lock()
	if j.spare == 0 {
		j.spare = n
	} else {
		err = os.Remove(j.sparePath(n))
	}
	j.mu.Unlock()
	return err
}

// recycle turns the sealed segments, whose batches a flush made durable, into the spare (the newest) or
// removes them.
func (j *journal) recycle(sealed []uint64) error {
	for _, n := range sealed {
		j.mu.Lock()
		keep := j.spare == 0
		j.mu.Unlock()
		var err error
		if keep {
			err = os.Rename(j.logPath(n), j.sparePath(n))
		} else {
			err = os.Remove(j.logPath(n))
		}
		if err != nil {
			return fmt.Errorf("journal: recycle segment %d: %w", n, err)
		}
		j.mu.Lock()
		if keep {
			j.spare = n
		}
		j.sealed = slices.DeleteFunc(j.sealed, func(s uint64) bool { return s == n })
		j.mu.Unlock()
	}
	return j.syncFolder(len(sealed) > 0)
}

// syncFolder, when changed and fsync is on, makes the folder's renames and removals durable before any
// later one: replayed alone, without the segments after it, a segment whose removal a power loss undid
// would put keys back to older values, so the removal of one segment must not outlive the next one's on a
// file system that does not keep the order of directory updates.
func (j *journal) syncFolder(changed bool) error {
	if !changed || j.noSync {
		return nil
	}
	if err := dirsync.Sync(j.dir); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// close stops the flusher and closes the segment. When clean and the journal is healthy, it then flushes the
// memtable and recycles every segment, so that the next Open has nothing to replay; otherwise it leaves the
// files as a killed process would. Nothing may be appended during or after close.
func (j *journal) close(clean bool) error {
	close(j.flushReq)
	<-j.stopped
	var err error
	if j.f != nil {
		err = j.f.Close()
	}
	if !clean || err != nil || j.werr != nil {
		return errors.Join(err, j.werr)
	}
	if err := j.flush(); err != nil {
		return fmt.Errorf("journal: flush on close: %w", mapErr(err))
	}
	j.mu.Lock()
	sealed := slices.Clone(j.sealed)
	j.mu.Unlock()
	if j.f != nil {
		sealed = append(sealed, j.num)
	}
	j.f = nil
	return j.recycle(sealed)
}
