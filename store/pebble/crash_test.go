package pebble_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/pebble"
)

const crashEnv = "WAYPOST_PEBBLE_CRASH_DIR"

// TestCrashChild is the child of TestKilledMidLoad: it commits (2 KB feed items) from 8 goroutines until
// killed and prints "ack <first> <tag>" after each acknowledged commit.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("child process of TestKilledMidLoad")
	}
	s, err := pebble.Open(path, pebble.Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	ctr := port.Key{PK: "sp", SK: "SEQ"}
	pad := strings.Repeat("p", 2000) // so that the memtable fills and is flushed to tables within a round
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for j := 0; ; j++ {
				tag := fmt.Sprintf("%s-w%d-%d", os.Getenv(crashEnv+"_ROUND"), w, j)
				first, err := s.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 1 << 53,
					Build: func(first uint64) ([]port.Op, error) {
						return []port.Op{
							port.Put(port.Item{Key: port.Key{PK: "feed", SK: fmt.Sprintf("%020d", first)}, Data: []byte(tag + " " + pad)}, port.NotExists()),
							port.Put(port.Item{Key: port.Key{PK: "rec", SK: tag}, Attrs: map[string]string{"seq": fmt.Sprint(first)}}, port.NotExists()),
						}, nil
					}})
				mu.Lock()
				if err != nil {
					fmt.Println("error", err)
				} else {
					fmt.Println("ack", first, tag)
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
}

// TestKilledMidLoad kills (SIGKILL) a process committing under load and checks, after reopening, that every
// acknowledged commit is present exactly once, and that the store is consistent: the counter equals the
// number of feed items, feed values are gapless, and each feed item has its record and vice versa
// (SUPPLEMENT §7.4, last row).
func TestKilledMidLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "items")
	for round := 0; round < 3; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+path, fmt.Sprintf("%s_ROUND=r%d", crashEnv, round))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked := map[uint64]string{}
		sc := bufio.NewScanner(out)
		killAt := []int{200, 2000, 20000}[round] // the last rounds run through memtable flushes
		// A bound against a child that hangs, not a speed limit: round 2 needs 20,000 fsynced acks, which a
		// loaded machine under the race detector takes well over a minute to give.
		deadline := time.AfterFunc(4*time.Minute, func() { _ = cmd.Process.Kill() })
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 3 && f[0] == "ack" {
				n, _ := strconv.ParseUint(f[1], 10, 64)
				acked[n] = f[2]
				if len(acked) == killAt {
					_ = cmd.Process.Kill()
				}
			} else if len(f) > 0 && f[0] == "error" {
				t.Errorf("child: %s", sc.Text())
			}
		}
		deadline.Stop()
		_ = cmd.Wait()
		if len(acked) < killAt {
			t.Fatalf("round %d: child stopped after %d acks", round, len(acked))
		}

		s, err := pebble.Open(path, pebble.Options{})
		if err != nil {
			t.Fatalf("reopen after kill: %v", err)
		}
		ctx := context.Background()
		ctrItem, ok, err := s.Get(ctx, port.Key{PK: "sp", SK: "SEQ"})
		if err != nil || !ok {
			t.Fatalf("counter: %v %v", ok, err)
		}
		counter, _ := strconv.ParseUint(ctrItem.Attr(port.CounterAttr), 10, 64)
		var feed []port.Item
		for after := ""; ; {
			page, err := s.Query(ctx, port.Query{PK: "feed", After: after, Limit: 500})
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			feed = append(feed, page...)
			after = page[len(page)-1].SK
		}
		if uint64(len(feed)) != counter {
			t.Fatalf("round %d: counter %d but %d feed items", round, counter, len(feed))
		}
		tags := map[string]bool{}
		for i, it := range feed {
			if it.SK != fmt.Sprintf("%020d", i+1) {
				t.Fatalf("round %d: feed not gapless at %d: %s", round, i, it.SK)
			}
			tag, _, _ := strings.Cut(string(it.Data), " ")
			if tags[tag] {
				t.Fatalf("round %d: commit %s present twice", round, tag)
			}
			tags[tag] = true
			rec, ok, err := s.Get(ctx, port.Key{PK: "rec", SK: tag})
			if err != nil || !ok || rec.Attr("seq") != fmt.Sprint(i+1) {
				t.Fatalf("round %d: record of %s: %+v %v %v", round, tag, rec, ok, err)
			}
		}
		for n, tag := range acked {
			if n > counter || !strings.HasPrefix(string(feed[n-1].Data), tag+" ") {
				t.Fatalf("round %d: acknowledged commit %d (%s) lost", round, n, tag)
			}
		}
		recs, err := s.Query(ctx, port.Query{PK: "rec", Limit: 100000})
		if err != nil || len(recs) != len(feed) {
			t.Fatalf("round %d: %d records for %d feed items (%v)", round, len(recs), len(feed), err)
		}
		t.Logf("round %d: %d acknowledged this round, %d committed in all", round, len(acked), counter)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
