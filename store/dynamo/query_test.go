package dynamo_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
	"github.com/waypost/waypost/store/mem"
)

// Bounds need not be UTF-8 (the domain queries "ACT#" … "ACT#\xff"); DynamoDB strings must be. The store
// widens such bounds on the wire and applies the exact ones to the results: it must return exactly what the
// byte-keyed in-memory store returns, page by page.
func TestQueryNonUTF8Bounds(t *testing.T) {
	srv := dynamotest.New(t)
	ddb := srv.Store(t, nil, dynamo.Options{})
	ref := mem.New()
	sks := []string{"A", "ACS", "ACT", "ACT#", "ACT#a", "ACT#é", "ACT#\U0010FFFF", "ACT#\U0010FFFFz", "ACT$", "ACU",
		"\x7f", "é", "éa", "ê", "\U0010FFFF", "\U0010FFFF\U0010FFFF"}
	ops := make([]port.Op, len(sks))
	for i, sk := range sks {
		ops[i] = port.Put(port.Item{Key: port.Key{PK: "p", SK: sk}, Data: []byte(sk)}, port.Cond{})
	}
	for _, s := range []port.ItemStore{ddb, ref} {
		if _, err := s.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) { return ops, nil }}); err != nil {
			t.Fatal(err)
		}
	}
	bounds := []string{"", "ACT#", "ACT#\xff", "ACT#\xc3", "ACT\xff", "\xff", "\xc3", "é\xff", "\x7f\xff", "\U0010FFFF\xff", "ACT#\U0010FFFF\xff", "A"}
	for _, after := range bounds {
		for _, upTo := range bounds {
			for _, limit := range []int{0, 1, 2, 5} {
				q := port.Query{PK: "p", After: after, UpTo: upTo, Limit: limit}
				got, err := ddb.Query(context.Background(), q)
				if err != nil {
					t.Fatalf("query %q: %v", fmt.Sprintf("%+v", q), err)
				}
				want, err := ref.Query(context.Background(), q)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(keys(got)) != fmt.Sprint(keys(want)) {
					t.Fatalf("After %q UpTo %q Limit %d: %q, want %q", after, upTo, limit, keys(got), keys(want))
				}
			}
		}
	}
}

func keys(items []port.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.SK
	}
	return out
}
