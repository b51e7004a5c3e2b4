package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waypost/waypost/domain/port"
)

// smallSegments is a journal segment size that a test fills with a few dozen commits.
const smallSegments = 64 << 10

// put commits one unconditional put of key with data.
func put(t *testing.T, s *Store, key port.Key, data []byte) {
	t.Helper()
	if _, err := s.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) {
		return []port.Op{port.Put(port.Item{Key: key, Data: data}, port.Cond{})}, nil
	}}); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// del commits the deletion of key.
func del(t *testing.T, s *Store, key port.Key) {
	t.Helper()
	if _, err := s.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) {
		return []port.Op{port.Delete(key, port.Cond{})}, nil
	}}); err != nil {
		t.Fatalf("delete %s: %v", key, err)
	}
}

// crash stops the store as a killed process leaves it: the memtable is lost (pebble writes no log of its
// own), the journal's files stay as they are, nothing is flushed or recycled.
func crash(t *testing.T, s *Store) {
	t.Helper()
	if err := s.close(false); err != nil {
		t.Fatalf("crash: %v", err)
	}
}

// settle waits until the journal's flusher has recycled every sealed segment.
func settle(t *testing.T, s *Store) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s.journal.mu.Lock()
		n := len(s.journal.sealed)
		s.journal.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sealed segments still not recycled", n)
		}
	}
}

// openSmallSegments opens a store in a new folder with journal segments of smallSegments, and returns it with
// its folder and options.
func openSmallSegments(t *testing.T) (*Store, string, Options) {
	t.Helper()
	dir, opts := filepath.Join(t.TempDir(), "items"), Options{segmentSize: smallSegments}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir, opts
}

// reopenAfterCrash crashes s (crash) and opens the store in dir again, closed when the test ends.
func reopenAfterCrash(t *testing.T, s *Store, dir string, opts Options) *Store {
	t.Helper()
	crash(t, s)
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("reopen after the crash: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// mustGet reads key and fails the test unless its data is want (nil: absent).
func mustGet(t *testing.T, s *Store, key port.Key, want []byte) {
	t.Helper()
	it, found, err := s.Get(context.Background(), key)
	switch {
	case err != nil:
		t.Fatalf("get %s: %v", key, err)
	case want == nil && found:
		t.Fatalf("%s is back (%q) after its deletion", key, truncate(it.Data))
	case want != nil && !found:
		t.Fatalf("%s is lost", key)
	case want != nil && !bytes.Equal(it.Data, want):
		t.Fatalf("%s = %q, want %q", key, truncate(it.Data), truncate(want))
	}
}

func truncate(b []byte) []byte { return b[:min(len(b), 40)] }

// TestJournalReplaysAfterCrash: commits spread over many recycled segments, a key overwritten in each of
// them and one deleted, then a crash: the reopened store has every commit in its last state. The records of
// the files' earlier segments, still in the recycled files past the new records, are not replayed (they
// would bring back an older value of the overwritten key or the deleted one), and the segment files stay
// few.
func TestJournalReplaysAfterCrash(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("noSync=%v", noSync), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "items")
			opts := Options{NoSync: noSync, segmentSize: smallSegments}
			s, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			pad := strings.Repeat("x", 900)
			hot, gone := port.Key{PK: "P", SK: "hot"}, port.Key{PK: "P", SK: "gone"}
			put(t, s, gone, []byte("soon deleted"))
			const n = 600 // about 600 KB of records: nine segments of 64 KB
			for i := range n {
				put(t, s, port.Key{PK: "P", SK: fmt.Sprintf("k%04d", i)}, []byte(fmt.Sprint(i, pad)))
				put(t, s, hot, []byte(fmt.Sprint("hot ", i, pad)))
				if i == n/2 {
					del(t, s, gone)
				}
				if i%50 == 49 {
					settle(t, s) // so that segments are recycled however slow the flushes are next to the commits
				}
			}
			files, err := os.ReadDir(s.journal.dir)
			if err != nil {
				t.Fatal(err)
			}
			if s.journal.num < 5 || len(files) > 4 {
				t.Fatalf("segment %d open, files %v: want many segments in a few recycled files", s.journal.num, files)
			}
			s = reopenAfterCrash(t, s, dir, opts)
			for i := range n {
				mustGet(t, s, port.Key{PK: "P", SK: fmt.Sprintf("k%04d", i)}, []byte(fmt.Sprint(i, pad)))
			}
			mustGet(t, s, hot, []byte(fmt.Sprint("hot ", n-1, pad)))
			mustGet(t, s, gone, nil)
		})
	}
}

// TestJournalTornTail: a crash in the middle of the last record's write (its last byte never reached the
// disk) loses that record alone; the store opens with every record before it.
func TestJournalTornTail(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "items")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		put(t, s, port.Key{PK: "P", SK: fmt.Sprint(i)}, []byte(fmt.Sprint("value ", i)))
	}
	seg, end := s.journal.logPath(s.journal.num), s.journal.off
	crash(t, s)

	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0}, end-1); err != nil { // the last record's last byte, as a torn write leaves it
		t.Fatal(err)
	}
	_ = f.Close()

	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	for i := range 9 {
		mustGet(t, s, port.Key{PK: "P", SK: fmt.Sprint(i)}, []byte(fmt.Sprint("value ", i)))
	}
	mustGet(t, s, port.Key{PK: "P", SK: "9"}, nil)
}

// TestJournalRecordLargerThanASegment: a group's record larger than a whole segment is written alone into a
// segment of its own, which grows to hold it, and is replayed after a crash.
func TestJournalRecordLargerThanASegment(t *testing.T) {
	s, dir, opts := openSmallSegments(t)
	small := []byte("small")
	big := randomBytes(3 * smallSegments) // so that its record is not compressed smaller than a segment
	put(t, s, port.Key{PK: "P", SK: "1"}, small)
	put(t, s, port.Key{PK: "P", SK: "2"}, big)
	if s.journal.off <= smallSegments {
		t.Fatalf("the big group's segment holds %d bytes: its record is not larger than a segment", s.journal.off)
	}
	put(t, s, port.Key{PK: "P", SK: "3"}, small)
	s = reopenAfterCrash(t, s, dir, opts)
	mustGet(t, s, port.Key{PK: "P", SK: "1"}, small)
	mustGet(t, s, port.Key{PK: "P", SK: "2"}, big)
	mustGet(t, s, port.Key{PK: "P", SK: "3"}, small)
}

// TestJournalCloseLeavesNothingToReplay: a clean Close flushes the memtable and recycles every segment: the
// folder then holds one spare file and no segment.
func TestJournalCloseLeavesNothingToReplay(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "items")
	s, err := Open(dir, Options{segmentSize: smallSegments})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		put(t, s, port.Key{PK: "P", SK: fmt.Sprint(i)}, bytes.Repeat([]byte("v"), 1000))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, journalFolder))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || !strings.HasSuffix(entries[0].Name(), ".spare") {
		t.Fatalf("journal after Close: %v, want one spare file", entries)
	}
	s, err = Open(dir, Options{segmentSize: smallSegments})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustGet(t, s, port.Key{PK: "P", SK: "199"}, bytes.Repeat([]byte("v"), 1000))
}

// TestJournalFailureFailsTheStore: after a failed journal write the commit and every later one fail with
// port.ErrUnavailable, and reads never show the failed commit.
func TestJournalFailureFailsTheStore(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "items"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put(t, s, port.Key{PK: "P", SK: "before"}, []byte("v"))
	_ = s.journal.f.Close() // the next write fails
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) {
				return []port.Op{port.Put(port.Item{Key: port.Key{PK: "P", SK: fmt.Sprint("after", i)}}, port.Cond{})}, nil
			}})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, port.ErrUnavailable) {
			t.Fatalf("commit %d after the failed write: %v, want ErrUnavailable", i, err)
		}
		mustGet(t, s, port.Key{PK: "P", SK: fmt.Sprint("after", i)}, nil)
	}
	mustGet(t, s, port.Key{PK: "P", SK: "before"}, []byte("v"))
	if _, err := s.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) {
		return []port.Op{port.Put(port.Item{Key: port.Key{PK: "P", SK: "later"}}, port.Cond{})}, nil
	}}); !errors.Is(err, port.ErrUnavailable) {
		t.Fatalf("a later commit: %v, want ErrUnavailable", err)
	}
}

// TestJournalRefusesUnknownFiles: a file the journal did not write in its folder stops Open rather than
// being ignored or removed.
func TestJournalRefusesUnknownFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "items")
	s, err := Open(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, journalFolder, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(dir, Options{NoSync: true}); err == nil || !strings.Contains(err.Error(), "notes.txt") {
		if err == nil {
			_ = s.Close()
		}
		t.Fatalf("open with an unknown file in the journal: %v, want it named", err)
	}
}

// randomBytes returns n bytes of a fixed pseudo-random sequence, which no compressor shrinks.
func randomBytes(n int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// record returns the record appendRecord writes for batch in segment n.
func record(t testing.TB, n uint64, batch []byte) []byte {
	t.Helper()
	rec, _, err := appendRecord(nil, nil, n, batch)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestRecordRoundTrip: a record reads back as written, and a record of another segment, or with any one
// byte changed, or cut short, ends the segment; so does a compressed one (a batch of compressMin bytes or
// more that compresses), which reads back as the batch.
func TestRecordRoundTrip(t *testing.T) {
	ackLike := bytes.Repeat([]byte(`{"item_id":"it_2n9c_0ffee161d980ea93","space_id":"sp_01jz8k3m4n5p6q7r8s9t0v1w2x","item_type":"receipt"}`), 450)
	for _, tt := range []struct {
		name       string
		batch      []byte
		compressed bool
	}{
		{"small", []byte("a batch representation"), false},
		{"below compressMin", bytes.Repeat([]byte("x"), compressMin-1), false},
		{"compressible", ackLike, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := record(t, 7, tt.batch)
			if flagged := binary.LittleEndian.Uint32(rec[4:8])&compressedRecord != 0; flagged != tt.compressed {
				t.Fatalf("compressed %v, want %v", flagged, tt.compressed)
			}
			if tt.compressed && len(rec) > len(tt.batch)/2 {
				t.Fatalf("a record of %d bytes for a batch of %d", len(rec), len(tt.batch))
			}
			got, next, ok, err := parseRecord(rec, 0, 7)
			if !ok || err != nil || !bytes.Equal(got, tt.batch) || next != len(rec) {
				t.Fatalf("parse = %q, %d, %v, %v", truncate(got), next, ok, err)
			}
			if _, _, ok, _ := parseRecord(rec, 0, 8); ok {
				t.Fatal("a record of segment 7 read as segment 8's")
			}
			for i := range rec {
				bad := bytes.Clone(rec)
				bad[i] ^= 0x20
				if _, _, ok, _ := parseRecord(bad, 0, 7); ok {
					t.Fatalf("byte %d changed, the record still reads", i)
				}
			}
			for n := range len(rec) {
				if _, _, ok, _ := parseRecord(rec[:n], 0, 7); ok {
					t.Fatalf("cut to %d bytes, the record still reads", n)
				}
			}
		})
	}
	if rec := record(t, 7, randomBytes(3*compressMin)); binary.LittleEndian.Uint32(rec[4:8])&compressedRecord != 0 {
		t.Fatal("a batch that does not compress by a quarter was written compressed")
	}
}

// TestRecordUndecodable: a compressed record whose CRC holds but whose payload does not decompress (what a
// writer's bug would leave) fails the replay instead of ending the segment there quietly.
func TestRecordUndecodable(t *testing.T) {
	payload := []byte("not a MinLZ block at all, though long enough")
	rec := binary.LittleEndian.AppendUint32(nil, 0)
	rec = binary.LittleEndian.AppendUint32(rec, uint32(len(payload))|compressedRecord)
	rec = binary.LittleEndian.AppendUint64(rec, 7)
	rec = append(rec, payload...)
	binary.LittleEndian.PutUint32(rec, crc32.Checksum(rec[4:], castagnoli))
	if _, _, ok, err := parseRecord(rec, 0, 7); ok || err == nil {
		t.Fatalf("parse = %v, %v; want an error", ok, err)
	}
}

// TestJournalReplaysCompressedRecords: groups large enough to be written compressed are all back after a
// crash, and a segment is sealed by the size of its batches, not of its smaller records.
func TestJournalReplaysCompressedRecords(t *testing.T) {
	s, dir, opts := openSmallSegments(t)
	value := func(i int) []byte {
		return []byte(strings.Repeat(fmt.Sprintf("value %d of a compressible group; ", i), 1100))
	}
	const n = 6 // about 6 × 38 KB of batches, written as about 6 × 2 KB of records
	for i := range n {
		put(t, s, port.Key{PK: "P", SK: fmt.Sprintf("k%02d", i)}, value(i))
	}
	if s.journal.num < 2 {
		t.Fatalf("segment %d open after %d KB of batches in segments of %d KB", s.journal.num, n*38, smallSegments>>10)
	}
	if s.journal.off > s.journal.used/4 {
		t.Fatalf("%d bytes of records for %d bytes of batches: not compressed", s.journal.off, s.journal.used)
	}
	s = reopenAfterCrash(t, s, dir, opts)
	for i := range n {
		mustGet(t, s, port.Key{PK: "P", SK: fmt.Sprintf("k%02d", i)}, value(i))
	}
}

// FuzzParseRecord: parsing arbitrary bytes never panics, stays within the data, and whatever it reads is a
// batch appendRecord writes a record of that reads back as the same batch (the same bytes, for a record
// written uncompressed below compressMin).
func FuzzParseRecord(f *testing.F) {
	f.Add(record(f, 1, []byte("batch")), uint64(1))
	f.Add(append(record(f, 3, []byte("one")), record(f, 3, []byte("two"))...), uint64(3))
	f.Add(record(f, 2, bytes.Repeat([]byte("compressible "), 3000)), uint64(2))
	f.Add(make([]byte, 64), uint64(1))
	f.Fuzz(func(t *testing.T, data []byte, n uint64) {
		for off := 0; ; {
			batch, next, ok, err := parseRecord(data, off, n)
			if err != nil || !ok {
				return
			}
			if next <= off || next > len(data) {
				t.Fatalf("next %d after %d in %d bytes", next, off, len(data))
			}
			again := record(t, n, batch)
			if binary.LittleEndian.Uint32(data[off+4:])&compressedRecord == 0 && len(batch) < compressMin && !bytes.Equal(again, data[off:next]) {
				t.Fatalf("record at %d does not re-encode to itself", off)
			}
			if back, _, ok, err := parseRecord(again, 0, n); !ok || err != nil || !bytes.Equal(back, batch) {
				t.Fatalf("record at %d: its batch does not read back", off)
			}
			if binary.LittleEndian.Uint64(data[off+8:]) != n {
				t.Fatal("record of another segment accepted")
			}
			off = next
		}
	})
}

func TestJournalReadOnlyUseWritesNoFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "items")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustGet(t, s, port.Key{PK: "P", SK: "1"}, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, journalFolder))
	if err != nil || len(entries) != 0 {
		t.Fatalf("journal folder after reads alone: %v %v, want empty", entries, err)
	}
}

// TestJournalFlushBeforeSyncKeepsGroupsWhole: a memtable flush (the journal's flusher after a seal, or
// Checkpoint's) that runs while a group waits for its fsync, followed by a power loss that takes the group's
// unsynced record, must leave the group either whole or absent after replay. A flush that took the group's
// batch into the tables leaves its new keys there while replaying the earlier records puts the keys it
// overwrote back to their older values: half a commit (a counter behind the items it allocated).
func TestJournalFlushBeforeSyncKeepsGroupsWhole(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "items")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctr, item := port.Key{PK: "P", SK: "counter"}, port.Key{PK: "P", SK: "item2"}
	put(t, s, ctr, []byte("1"))
	seg, start := s.journal.logPath(s.journal.num), s.journal.off
	var end int64
	s.beforeSync = func() {
		if err := s.db.Flush(); err != nil { // as the flusher or Checkpoint may, at this moment
			t.Error(err)
		}
		end = s.journal.off
	}
	if _, err := s.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) {
		return []port.Op{port.Put(port.Item{Key: ctr, Data: []byte("2")}, port.Cond{}),
			port.Put(port.Item{Key: item, Data: []byte("2")}, port.Cond{})}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	s.beforeSync = nil
	crash(t, s)

	// The power loss: the group's record never reached the disk.
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, end-start), start); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _, err := s.Get(context.Background(), ctr)
	if err != nil {
		t.Fatal(err)
	}
	_, found, err := s.Get(context.Background(), item)
	if err != nil {
		t.Fatal(err)
	}
	if (string(c.Data) == "2") != found {
		t.Fatalf("after the power loss: counter %q, item2 present %v: half a commit", c.Data, found)
	}
}
