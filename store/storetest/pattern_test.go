package storetest

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
)

// The generated stream must not depend on how it is read, or the digest computed in one pass would not match
// the bytes an adapter reads in another.
func TestPatternIndependentOfReadSizes(t *testing.T) {
	const n = 2*patternBlock + 13
	want, err := io.ReadAll(newPattern(n, 3))
	if err != nil || len(want) != n {
		t.Fatalf("%d bytes, %v", len(want), err)
	}
	// One-byte reads across the first block boundary.
	p := newPattern(n, 3)
	if _, err := io.CopyN(io.Discard, p, patternBlock-100); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(io.LimitReader(iotest.OneByteReader(p), 200))
	if err != nil || !bytes.Equal(got, want[patternBlock-100:patternBlock+100]) {
		t.Fatal("one-byte reads give another stream")
	}
	got, err = io.ReadAll(iotest.HalfReader(newPattern(n, 3)))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatal("half reads give another stream")
	}
	if other, _ := io.ReadAll(newPattern(n, 4)); bytes.Equal(other, want) {
		t.Fatal("seed ignored")
	}
	if patternDigest(n, 3) != digest(want) {
		t.Fatal("patternDigest disagrees")
	}
	if err := iotest.TestReader(newPattern(1000, 3), want[:1000]); err != nil {
		t.Fatal(err)
	}
}
