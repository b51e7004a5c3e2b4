package syncbuf_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/waypost/waypost/internal/syncbuf"
)

// TestListTakeAndAll: Take returns what was added since the last Take, in order, and empties the list; All
// copies without emptying; every value added concurrently is taken exactly once.
func TestListTakeAndAll(t *testing.T) {
	var l syncbuf.List[int]
	if got := l.Take(); got != nil {
		t.Fatalf("Take of an empty list: %v, want nil", got)
	}
	l.Add(1, 2)
	l.Add(3)
	all := l.All()
	all[0] = 99 // a copy: the list keeps its own
	if got := l.All(); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("All: %v, want [1 2 3]", got)
	}
	if got := l.Take(); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("Take: %v, want [1 2 3]", got)
	}
	if got := l.Take(); got != nil {
		t.Fatalf("Take after Take: %v, want nil", got)
	}

	var wg sync.WaitGroup
	var taken []int
	done := make(chan struct{})
	go func() { // takes while the writers add
		defer close(done)
		for range 50 {
			taken = append(taken, l.Take()...)
		}
	}()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				l.Add(w*100 + i)
			}
		}()
	}
	wg.Wait()
	<-done
	taken = append(taken, l.Take()...)
	slices.Sort(taken)
	for i, v := range taken {
		if v != i {
			t.Fatalf("taken %v, want each of 0..399 once", taken)
		}
	}
	if len(taken) != 400 {
		t.Fatalf("%d values taken, want 400", len(taken))
	}
}
