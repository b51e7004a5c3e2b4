package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/minio/minlz"
)

// The journal is the store's write-ahead log, written in place of pebble's own (which the store disables):
// the caller that makes a group durable appends the group's batch to it and fsyncs it itself, instead of
// handing the write to pebble's log-writer goroutine and waiting to be woken. A lone commit thus makes no
// goroutine hand-off between its evaluation and its answer (docs/decisions.md).
//
// The journal is a sequence of numbered segment files in the journal folder of the store, "<n>.log". A
// segment is a run of records
//
//	crc32c(rest) (4 bytes) ‖ len(payload) | flag (4 bytes) ‖ n (8 bytes) ‖ payload
//
// (little endian; the CRC covers the length, the segment number and the payload), one per group. The
// payload is pebble's batch representation, or, when the flag (the length field's top bit,
// compressedRecord) is set, that representation compressed with MinLZ (a block). A batch of compressMin
// bytes or more is written compressed when that saves a quarter of it: an inbox.ack of 50 items, about 45
// KB, takes about a fifth of that, and a write and fdatasync of 48 KB took 300 µs here against 200 µs for 16
// KB and 180 µs for 4 KB. Below compressMin the fsync takes about as long whatever the size, and
// compressing would only cost CPU (a lone send's record is about 2.5 KB, a group of ten sends about 25 KB).
// Journals written before the flag read as they did; a binary from before it stops replaying at the first
// compressed record, so a store is taken back to such a binary only after a clean close (which leaves no
// record to replay).
//
// Replay reads each segment up to its first record that is incomplete, has a bad CRC or carries another
// segment's number: a torn write at the end, the zeros of an unused file, or the records of the segment the
// file held before it was recycled.
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
	fs      vfs.FS
	dir     string
	noSync  bool  // Options.NoSync: no fsync, and new files are not filled
	segSize int64 // a segment is sealed before a record would take it past this size
	// reserve is the room a segment is opened only when it leaves free on the volume: room for the flushes
	// of the memtable (pebble's tables), so that the journal, not a flush, is what finds the disk full.
	reserve int64
	flush   func(stop <-chan struct{}) error
	log     *slog.Logger

	// Owned by the caller making a group durable (one at a time, in order).
	f    vfs.File // nil until the first record: a store only read (a backup being verified) writes no journal
	num  uint64   // f's segment number, or the number of the next segment to open while f is nil
	off  int64    // the end of f's last record
	good int64    // the end of f's last record that is durable and answered (committed): what a repair keeps
	used int64    // the bytes f's records hold before compression: what the segment puts in the memtable
	rec  []byte   // the record being written, reused
	zbuf []byte   // the compressed batch of the record being written, reused
	werr error    // set once a write or sync failed: the journal takes nothing more until repair

	mu     sync.Mutex // guards spare, sealed and opened
	spare  uint64     // the number of the spare file, 0 when there is none
	sealed []uint64   // sealed segments not yet recycled, oldest first
	opened uint64     // the newest segment opened, 0 before the first

	flushReq chan struct{} // wakes the flusher: a segment was sealed or opened
	stop     chan struct{} // closed by close: a flush waited for is abandoned
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
	// closeFlushWait bounds the flush of a clean close.
	closeFlushWait = 20 * time.Second
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errJournalFailed reports a journal that took a failed write or sync.
var errJournalFailed = errors.New("journal: an earlier write or sync failed")

// errNoRoom reports a volume with less free room than the journal keeps (it wraps ENOSPC, so that it is
// classified as a full disk).
type errNoRoom struct {
	dir         string
	avail, need int64
}

func (e *errNoRoom) Error() string {
	return fmt.Sprintf("%d bytes free on the volume of %s, fewer than the %d the journal needs to open a segment", e.avail, e.dir, e.need)
}

func (e *errNoRoom) Unwrap() error { return syscall.ENOSPC }

// journalOptions are what openJournal needs besides the directory.
type journalOptions struct {
	fs      vfs.FS
	segSize int64
	reserve int64
	noSync  bool
	log     *slog.Logger
	apply   func(batch []byte) error // applies a replayed batch to the memtable
	// flush flushes the memtable to tables, giving up (with an error) when stop is closed.
	flush func(stop <-chan struct{}) error
	// replayFlush closes when the flush after replay is to be given up (a volume too full to take it).
	replayFlush <-chan struct{}
}

// openJournal replays the journal in storeDir into the database through apply, makes what it replayed
// durable with flush, and opens a new segment for what follows. The flusher runs until close.
func openJournal(storeDir string, o journalOptions) (*journal, error) {
	j := &journal{fs: o.fs, dir: filepath.Join(storeDir, journalFolder), noSync: o.noSync, segSize: o.segSize, reserve: o.reserve,
		flush: o.flush, log: o.log, flushReq: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	if err := j.fs.MkdirAll(j.dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	// The folder's own entry in the store's directory: until that directory is synced, a power loss may take
	// the folder, and every segment in it, however synced the segments are. pebble syncs the directory
	// when it writes tables, but the first segment's records are acknowledged long before that.
	if !o.noSync {
		if err := j.syncDir(storeDir); err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
	}
	logs, spares, err := j.list()
	if err != nil {
		return nil, err
	}
	for _, n := range logs {
		if err := j.replay(n, o.apply); err != nil {
			return nil, err
		}
	}
	if len(logs) > 0 {
		if err := o.flush(o.replayFlush); err != nil {
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
			if err := j.fs.Remove(j.sparePath(n)); err != nil {
				return nil, fmt.Errorf("journal: %w", err)
			}
		}
	}
	for _, n := range logs {
		if n != last {
			if err := j.fs.Remove(j.logPath(n)); err != nil {
				return nil, fmt.Errorf("journal: %w", err)
			}
		}
	}
	switch {
	case slices.Contains(logs, last):
		if err := j.fs.Rename(j.logPath(last), j.sparePath(last)); err != nil {
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
	entries, err := j.fs.List(j.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	slices.Sort(entries)
	for _, name := range entries {
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
	data, err := j.readFile(j.logPath(n))
	if err != nil {
		return fmt.Errorf("journal: replay: %w", mapErr(err))
	}
	for off := 0; ; {
		batch, next, ok, err := parseRecord(data, off, n)
		if err != nil {
			return fmt.Errorf("journal: replay segment %d at %d: %w", n, off, err)
		}
		if !ok {
			return nil
		}
		if err := apply(batch); err != nil {
			return fmt.Errorf("journal: replay segment %d at %d: %w", n, off, err)
		}
		off = next
	}
}

// compressedRecord is the flag of a record whose payload is its batch compressed (the top bit of the
// length field), and compressMin the smallest batch written compressed.
const (
	compressedRecord = 1 << 31
	compressMin      = 32 << 10
)

// parseRecord reads the record of segment n at off in data: its batch and the offset after it, or ok false
// where the segment's records end. The batch of a compressed record is decompressed into a new slice; a
// compressed record whose CRC holds but which does not decompress is an error.
func parseRecord(data []byte, off int, n uint64) (batch []byte, next int, ok bool, err error) {
	if off < 0 || len(data)-off < recordHeader {
		return nil, 0, false, nil
	}
	h := data[off : off+recordHeader]
	field := binary.LittleEndian.Uint32(h[4:8])
	size := int(field &^ compressedRecord)
	if size == 0 || binary.LittleEndian.Uint64(h[8:16]) != n || size > len(data)-off-recordHeader {
		return nil, 0, false, nil
	}
	end := off + recordHeader + size
	if crc32.Checksum(data[off+4:end], castagnoli) != binary.LittleEndian.Uint32(h[0:4]) {
		return nil, 0, false, nil
	}
	payload := data[off+recordHeader : end]
	if field&compressedRecord == 0 {
		return payload, end, true, nil
	}
	if batch, err = minlz.Decode(nil, payload); err != nil {
		return nil, 0, false, fmt.Errorf("decompressing a record: %w", err)
	}
	return batch, end, true, nil
}

// appendRecord appends the record of batch for segment n to dst, its payload compressed into zbuf when that
// pays (compressMin), and returns dst and zbuf.
func appendRecord(dst, zbuf []byte, n uint64, batch []byte) ([]byte, []byte, error) {
	payload, field := batch, uint32(len(batch))
	if len(batch) >= compressMin && len(batch) <= minlz.MaxBlockSize {
		z, err := minlz.Encode(zbuf[:cap(zbuf)], batch, minlz.LevelFastest)
		if err == nil && len(z) <= len(batch)-len(batch)/4 {
			payload, field, zbuf = z, uint32(len(z))|compressedRecord, z
		}
	}
	if len(payload) >= compressedRecord {
		return dst, zbuf, fmt.Errorf("a group's batch of %d bytes is too large for a record", len(batch))
	}
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = binary.LittleEndian.AppendUint32(dst, field)
	dst = binary.LittleEndian.AppendUint64(dst, n)
	dst = append(dst, payload...)
	binary.LittleEndian.PutUint32(dst[start:], crc32.Checksum(dst[start+4:], castagnoli))
	return dst, zbuf, nil
}

// readFile reads a whole file.
func (j *journal) readFile(path string) ([]byte, error) {
	f, err := j.fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// syncDir makes the entries of dir durable.
func (j *journal) syncDir(dir string) error {
	d, err := j.fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// checkRoom returns an errNoRoom when the volume has less than need bytes free (nothing when the file
// system cannot tell).
func (j *journal) checkRoom(need int64) error {
	if j.noSync {
		return nil // tests without durability do not fill files either
	}
	u, err := j.fs.GetDiskUsage(j.dir)
	if err != nil {
		return nil
	}
	if int64(u.AvailBytes) < need {
		return &errNoRoom{dir: j.dir, avail: int64(u.AvailBytes), need: need}
	}
	return nil
}

// open makes segment n the one written: the spare file renamed, or a new file filled with zeros, synced
// together with the folder before any record of n is acknowledged. It refuses (errNoRoom) when the volume
// would be left with less than the journal's reserve.
func (j *journal) open(n uint64) error {
	j.mu.Lock()
	spare := j.spare
	j.mu.Unlock()
	need := j.reserve
	if spare == 0 {
		need += j.segSize
	}
	if err := j.checkRoom(need); err != nil {
		return fmt.Errorf("journal: open segment %d: %w", n, err)
	}
	j.mu.Lock()
	j.spare = 0
	j.mu.Unlock()
	path := j.logPath(n)
	var f vfs.File
	var err error
	created := false
	if spare != 0 {
		if err = j.fs.Rename(j.sparePath(spare), path); err == nil {
			created = true
			f, err = j.fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
		}
	} else {
		f, err = j.fs.Create(path, vfs.WriteCategoryUnspecified)
		created = err == nil
		if err == nil && !j.noSync {
			err = fill(f, j.segSize)
		}
	}
	if err == nil && !j.noSync {
		err = j.syncDir(j.dir)
	}
	if err != nil {
		if f != nil {
			_ = f.Close()
		}
		if created { // a file without records of n: removed, so that a later open of n starts afresh
			_ = j.fs.Remove(path)
		}
		return fmt.Errorf("journal: open segment %d: %w", n, mapErr(err))
	}
	j.f, j.num, j.off, j.good, j.used = f, n, 0, 0, 0
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
func fill(f vfs.File, size int64) error {
	zeros := make([]byte, min(size, zeroChunk))
	for off := int64(0); off < size; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off); err != nil {
			return err
		}
	}
	return syncData(f)
}

// append writes batch as the next record (not synced: see sync), first sealing the segment when the record
// would take it past segSize. After a failed write the journal takes nothing more until repair: the file may
// hold a torn record, after which a later record would not be replayed.
func (j *journal) append(batch []byte) error {
	if j.werr != nil {
		return j.werr
	}
	if j.f == nil {
		if err := j.open(j.num); err != nil {
			return j.broken(err)
		}
	}
	// Sealed by the size of the batches, not of the records: a segment then never holds more than the
	// memtable it is flushed from (memTableSize), however well its batches compress.
	if j.off > 0 && j.used+recordHeader+int64(len(batch)) > j.segSize {
		if err := j.seal(); err != nil {
			return j.broken(err)
		}
	}
	var err error
	if j.rec, j.zbuf, err = appendRecord(j.rec[:0], j.zbuf, j.num, batch); err != nil {
		return j.broken(fmt.Errorf("journal: %w", err))
	}
	if _, err := j.f.WriteAt(j.rec, j.off); err != nil {
		return j.broken(fmt.Errorf("journal: write: %w", mapErr(err)))
	}
	j.off += int64(len(j.rec))
	j.used += recordHeader + int64(len(batch))
	if cap(j.rec) > 4*zeroChunk || cap(j.zbuf) > 4*zeroChunk {
		j.rec, j.zbuf = nil, nil // a huge group's buffers are not kept
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

// syncData makes f's data durable (fdatasync where there is one), again when a signal interrupted it.
func syncData(f vfs.File) error {
	for {
		err := f.SyncData()
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// committed records that the records written so far are durable and answered: a repair keeps them.
func (j *journal) committed() { j.good = j.off }

// broken records err as the failure after which the journal takes nothing more, and returns it.
func (j *journal) broken(err error) error {
	j.werr = fmt.Errorf("%w: %w", errJournalFailed, err)
	return err
}

// repair makes a journal that took a failed write or sync usable again, keeping exactly the records that
// reached the memtable (committed): the bytes written after them in the open segment — a torn record, or a
// whole one whose group was answered with the failure — are overwritten with zeros and synced, so that no
// replay can ever apply them; the segment is then sealed (the flusher recycles it once the memtable is
// flushed), and the next record opens a new segment. A segment file left without records by a failed open
// is removed. A repair that fails leaves the journal broken, to be repaired again. repaired, when not nil,
// runs once the repair is durable, before the flusher is woken (a test seam: Store.afterRepair).
func (j *journal) repair(repaired func()) error {
	if j.f != nil {
		if j.off > j.good {
			zeros := make([]byte, j.off-j.good)
			if _, err := j.f.WriteAt(zeros, j.good); err != nil {
				return fmt.Errorf("journal: repair: clearing segment %d from %d: %w", j.num, j.good, mapErr(err))
			}
			if !j.noSync {
				if err := syncData(j.f); err != nil {
					return fmt.Errorf("journal: repair: syncing segment %d: %w", j.num, mapErr(err))
				}
			}
			j.off = j.good
		}
		_ = j.f.Close() // its records were synced by the groups that wrote them
		j.f = nil
		j.mu.Lock()
		j.sealed = append(j.sealed, j.num)
		j.mu.Unlock()
		j.num++
	} else if _, err := j.fs.Stat(j.logPath(j.num)); err == nil {
		if err := j.fs.Remove(j.logPath(j.num)); err != nil {
			return fmt.Errorf("journal: repair: %w", mapErr(err))
		}
	}
	if err := j.syncFolder(true); err != nil {
		return fmt.Errorf("journal: repair: %w", mapErr(err))
	}
	j.werr = nil
	if repaired != nil {
		// Before the flusher is woken: the files as a crash right after the repair would leave them
		// (the flusher then recycles the sealed segment, concurrently with anything the hook does).
		repaired()
	}
	j.wake()
	return nil
}

// seal closes the current segment, hands it to the flusher and opens the next. Every record of the
// segment was synced by the group that wrote it, before this group's append.
func (j *journal) seal() error {
	err := j.f.Close()
	old := j.num
	j.f, j.num = nil, old+1
	j.mu.Lock()
	j.sealed = append(j.sealed, old)
	j.mu.Unlock()
	if err != nil {
		j.wake()
		return fmt.Errorf("journal: close segment %d: %w", old, mapErr(err))
	}
	return j.open(j.num) // wakes the flusher
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
			err := j.flush(j.stop)
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
// segment opened: spare files are never replayed, and later segments' numbers are larger. Without the room
// for it and the journal's reserve it waits for a later wake.
func (j *journal) prepareSpare() error {
	j.mu.Lock()
	n, has := j.opened, j.spare != 0
	j.mu.Unlock()
	if has || n == 0 || j.noSync {
		return nil
	}
	if j.checkRoom(j.segSize+j.reserve) != nil {
		return nil
	}
	f, err := j.fs.Create(j.sparePath(n), vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	err = fill(f, j.segSize)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Join(err, j.fs.Remove(j.sparePath(n)))
	}
	j.mu.Lock()
	if j.spare == 0 {
		j.spare = n
	} else {
		err = j.fs.Remove(j.sparePath(n))
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
			err = j.fs.Rename(j.logPath(n), j.sparePath(n))
		} else {
			err = j.fs.Remove(j.logPath(n))
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
	if err := j.syncDir(j.dir); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// close stops the flusher (abandoning a flush it waits for) and closes the segment. When clean and the
// journal is healthy, it then flushes the memtable and recycles every segment, so that the next Open has
// nothing to replay; otherwise it leaves the files as a killed process would. Nothing may be appended during
// or after close.
func (j *journal) close(clean bool) error {
	close(j.stop)
	close(j.flushReq)
	<-j.stopped
	var err error
	if j.f != nil {
		err = j.f.Close()
	}
	if !clean || err != nil || j.werr != nil {
		return err // a failed write was reported when it happened; the next Open replays the segments
	}
	// A flush that cannot finish (a volume too full for the tables) is given up: the segments stay, and the
	// next Open replays them.
	if err := j.flush(timeout(closeFlushWait)); err != nil {
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
