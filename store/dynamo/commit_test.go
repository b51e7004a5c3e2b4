package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
	"github.com/waypost/waypost/store/kv"
)

// faulty wraps the emulator's client. Each hook, when set, may answer a call instead of the emulator (return
// a non-nil error or output); it sees the calls in order.
type faulty struct {
	dynamo.API
	mu      sync.Mutex
	tx      func(n int, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error)
	get     func(n int) error
	txCalls []*dynamodb.TransactWriteItemsInput
	gets    int
}

func (f *faulty) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	f.mu.Lock()
	f.txCalls = append(f.txCalls, in)
	n, hook := len(f.txCalls), f.tx
	f.mu.Unlock()
	if hook != nil {
		if out, err := hook(n, in); out != nil || err != nil {
			return out, err
		}
	}
	return f.API.TransactWriteItems(ctx, in, o...)
}

func (f *faulty) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.mu.Lock()
	f.gets++
	n, hook := f.gets, f.get
	f.mu.Unlock()
	if hook != nil {
		if err := hook(n); err != nil {
			return nil, err
		}
	}
	return f.API.GetItem(ctx, in, o...)
}

func (f *faulty) calls() []*dynamodb.TransactWriteItemsInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*dynamodb.TransactWriteItemsInput(nil), f.txCalls...)
}

var fast = dynamo.Options{BaseBackoff: time.Microsecond, MaxBackoff: time.Millisecond}

func newFaulty(t *testing.T, opts dynamo.Options) (*faulty, *dynamo.Store, *dynamo.Store) {
	t.Helper()
	srv := dynamotest.New(t)
	f := &faulty{API: srv.Client}
	st := srv.Store(t, f, opts)
	clean, err := dynamo.New(srv.Client, st.Table(), dynamo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return f, st, clean
}

func cancelled(codes ...string) error {
	reasons := make([]types.CancellationReason, len(codes))
	for i, c := range codes {
		reasons[i] = types.CancellationReason{Code: aws.String(c)}
	}
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "TransactWriteItems",
		Err: &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}}
}

func httpError(status int) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "TransactWriteItems",
		Err: &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: errors.New("server error")}}}
}

// lostBodyError is the SDK's error for a 200 response whose body could not be read because the connection
// was closed under it (aws/aws-sdk-go-v2#2737; seen with minidynd under the full suite's load).
func lostBodyError() error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "GetItem",
		Err: &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 200}},
			Err: &smithy.DeserializationError{Err: fmt.Errorf("failed to decode response body, %w",
				&net.OpError{Op: "read", Net: "tcp", Err: net.ErrClosed})}}}}
}

func apiError(code string) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "X", Err: &smithy.GenericAPIError{Code: code, Message: "injected"}}
}

func put(pk, sk string) port.Op {
	return port.Put(port.Item{Key: port.Key{PK: pk, SK: sk}, Data: []byte("x")}, port.NotExists())
}

func mustGet(t *testing.T, s port.ItemStore, k port.Key) bool {
	t.Helper()
	_, ok, err := s.Get(context.Background(), k)
	if err != nil {
		t.Fatalf("get %s: %v", k, err)
	}
	return ok
}

// A TransactionConflict (or throttling) cancellation is retried with the same ClientRequestToken, so that a
// transaction DynamoDB did apply is not applied twice.
func TestCommitRetriesConflictWithSameToken(t *testing.T) {
	for _, code := range []string{"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"} {
		t.Run(code, func(t *testing.T) {
			f, st, clean := newFaulty(t, fast)
			f.tx = func(n int, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
				if n <= 2 {
					return nil, cancelled("None", code)
				}
				return nil, nil
			}
			ctr := port.Key{PK: "sp", SK: "SEQ"}
			first, err := st.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 10,
				Build: func(uint64) ([]port.Op, error) { return []port.Op{put("p", "a")}, nil }})
			if err != nil || first != 1 {
				t.Fatalf("commit: %d, %v; want 1, nil", first, err)
			}
			calls := f.calls()
			if len(calls) != 3 {
				t.Fatalf("%d TransactWriteItems calls, want 3", len(calls))
			}
			tok := aws.ToString(calls[0].ClientRequestToken)
			if tok == "" || len(tok) > 36 {
				t.Fatalf("client request token %q", tok)
			}
			for i, c := range calls {
				if aws.ToString(c.ClientRequestToken) != tok {
					t.Fatalf("call %d used token %q, call 0 %q", i, aws.ToString(c.ClientRequestToken), tok)
				}
			}
			if !mustGet(t, clean, port.Key{PK: "p", SK: "a"}) {
				t.Fatal("item not written")
			}
		})
	}
}

// Transient failures past Options.Retries wrap port.ErrUnavailable, and nothing is written.
func TestCommitTransientGivesUp(t *testing.T) {
	for name, fault := range map[string]error{
		"conflict":    cancelled("TransactionConflict"),
		"throttling":  apiError("ThrottlingException"),
		"provisioned": apiError("ProvisionedThroughputExceededException"),
		"inProgress":  apiError("TransactionInProgressException"),
		"http500":     httpError(500),
		"http503":     httpError(503),
		"internal":    apiError("InternalServerError"),
	} {
		t.Run(name, func(t *testing.T) {
			opts := fast
			opts.Retries = 3
			f, st, clean := newFaulty(t, opts)
			f.tx = func(int, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
				return nil, fault
			}
			_, err := st.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) { return []port.Op{put("p", "a")}, nil }})
			if !errors.Is(err, port.ErrUnavailable) {
				t.Fatalf("commit: %v, want ErrUnavailable", err)
			}
			if _, ok := port.FailedOp(err); ok {
				t.Fatalf("transient failure reported as a condition failure: %v", err)
			}
			if n := len(f.calls()); n != 4 {
				t.Fatalf("%d attempts, want 1 + 3 retries", n)
			}
			if mustGet(t, clean, port.Key{PK: "p", SK: "a"}) {
				t.Fatal("item written")
			}
		})
	}
}

// Permanent failures are neither retried nor reported as transient or as condition failures.
func TestCommitPermanentErrors(t *testing.T) {
	for name, fault := range map[string]error{
		"validation":       apiError("ValidationException"),
		"cancelValidation": cancelled("None", "ValidationError"),
		"collectionSize":   cancelled("ItemCollectionSizeLimitExceeded"),
		"http400":          httpError(400),
	} {
		t.Run(name, func(t *testing.T) {
			f, st, _ := newFaulty(t, fast)
			f.tx = func(int, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
				return nil, fault
			}
			_, err := st.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) {
				return []port.Op{put("p", "a"), put("p", "b")}, nil
			}})
			if err == nil || errors.Is(err, port.ErrUnavailable) {
				t.Fatalf("commit: %v, want a permanent error", err)
			}
			if _, ok := port.FailedOp(err); ok {
				t.Fatalf("reported as a condition failure: %v", err)
			}
			if n := len(f.calls()); n != 1 {
				t.Fatalf("%d attempts, want 1", n)
			}
		})
	}
}

// Each cancellation reason is mapped on its own: the lowest failing op wins, whatever else failed.
func TestCommitMapsEachReason(t *testing.T) {
	f, st, _ := newFaulty(t, fast)
	f.tx = func(int, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		return nil, cancelled("None", "TransactionConflict", "ConditionalCheckFailed", "ConditionalCheckFailed")
	}
	_, err := st.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) {
		return []port.Op{put("p", "a"), put("p", "b"), put("p", "c"), put("p", "d")}, nil
	}})
	var cf *port.ConditionFailedError
	if !errors.As(err, &cf) || cf.Index != 2 || cf.Key != (port.Key{PK: "p", SK: "c"}) {
		t.Fatalf("commit: %v, want condition failure on op 2 (p|c)", err)
	}
	if n := len(f.calls()); n != 1 {
		t.Fatalf("%d attempts: a condition failure must not be retried", n)
	}
	// With a counter, action 0 is the counter: op i is action i+1.
	f.tx = func(int, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		return nil, cancelled("None", "None", "ConditionalCheckFailed")
	}
	ctr := port.Key{PK: "sp", SK: "SEQ"}
	_, err = st.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 9, Build: func(uint64) ([]port.Op, error) {
		return []port.Op{put("q", "a"), put("q", "b")}, nil
	}})
	if i, ok := port.FailedOp(err); !ok || i != 1 {
		t.Fatalf("commit with counter: %v, want condition failure on op 1", err)
	}
	// A reason list that does not match the request is an error, not a guess.
	f.tx = func(int, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		return nil, cancelled("ConditionalCheckFailed")
	}
	_, err = st.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) { return []port.Op{put("r", "a"), put("r", "b")}, nil }})
	if _, ok := port.FailedOp(err); ok || err == nil {
		t.Fatalf("mismatched reasons: %v", err)
	}
}

// A failed counter condition means another commit allocated first: the store re-reads the counter and calls
// Build again with the new value, even when an op failed too (its key may depend on the stale value).
func TestCommitCounterMovedRebuilds(t *testing.T) {
	f, st, clean := newFaulty(t, fast)
	ctr := port.Key{PK: "sp", SK: "SEQ"}
	var built []uint64
	build := func(first uint64) ([]port.Op, error) {
		built = append(built, first)
		return []port.Op{put("feed", strings.Repeat("0", 3)+string(rune('0'+first)))}, nil
	}
	if _, err := st.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 9, Build: build}); err != nil {
		t.Fatal(err)
	}
	f.tx = func(n int, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		if n == 2 {
			// Someone else allocated 2 between our read and our write.
			if _, err := clean.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 9, Build: build}); err != nil {
				t.Error(err)
			}
			return nil, cancelled("ConditionalCheckFailed", "ConditionalCheckFailed")
		}
		return nil, nil
	}
	first, err := st.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 9, Build: build})
	if err != nil || first != 3 {
		t.Fatalf("commit: %d, %v; want 3 after the counter moved", first, err)
	}
	if want := []uint64{1, 2, 2, 3}; len(built) != len(want) || built[2] != 2 || built[3] != 3 {
		t.Fatalf("Build saw %v, want %v", built, want)
	}
	calls := f.calls()
	if aws.ToString(calls[1].ClientRequestToken) == aws.ToString(calls[2].ClientRequestToken) {
		t.Fatal("a rebuilt transaction reused the token of a different request")
	}
	for _, sk := range []string{"0001", "0002", "0003"} {
		if !mustGet(t, clean, port.Key{PK: "feed", SK: sk}) {
			t.Fatalf("feed %s missing", sk)
		}
	}
}

// Sustained counter contention is bounded and reported as transient.
func TestCommitCounterContentionBounded(t *testing.T) {
	opts := fast
	opts.CounterRetries = 5
	f, st, clean := newFaulty(t, opts)
	f.tx = func(int, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		return nil, cancelled("ConditionalCheckFailed", "None")
	}
	ctr := port.Key{PK: "sp", SK: "SEQ"}
	builds := 0
	_, err := st.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 9, Build: func(uint64) ([]port.Op, error) {
		builds++
		return []port.Op{put("p", "a")}, nil
	}})
	if !errors.Is(err, port.ErrUnavailable) {
		t.Fatalf("commit: %v, want ErrUnavailable", err)
	}
	if builds != 6 {
		t.Fatalf("Build called %d times, want 1 + 5 retries", builds)
	}
	if mustGet(t, clean, port.Key{PK: "p", SK: "a"}) || mustGet(t, clean, ctr) {
		t.Fatal("something was written")
	}
}

// Malformed transactions never reach DynamoDB.
func TestCommitRejectsBeforeSending(t *testing.T) {
	f, st, _ := newFaulty(t, fast)
	ctr := port.Key{PK: "sp", SK: "SEQ"}
	k := port.Key{PK: "p", SK: "a"}
	for name, tx := range map[string]port.Tx{
		"duplicate":     {Build: func(uint64) ([]port.Op, error) { return []port.Op{put("p", "a"), port.Check(k, port.Exists())}, nil }},
		"op on counter": {Counter: &ctr, Count: 1, Max: 9, Build: func(uint64) ([]port.Op, error) { return []port.Op{put("sp", "SEQ")}, nil }},
		"non-UTF-8 key": {Build: func(uint64) ([]port.Op, error) { return []port.Op{put("p", "\xff")}, nil }},
		"non-UTF-8 attr": {Build: func(uint64) ([]port.Op, error) {
			return []port.Op{port.Put(port.Item{Key: k, Attrs: map[string]string{"v": "\xc3"}}, port.Cond{})}, nil
		}},
		"too large item": {Build: func(uint64) ([]port.Op, error) {
			return []port.Op{port.Put(port.Item{Key: k, Data: make([]byte, 401<<10)}, port.Cond{})}, nil
		}},
		"101 actions":     {Build: func(uint64) ([]port.Op, error) { return manyPuts(101), nil }},
		"100 and counter": {Counter: &ctr, Count: 1, Max: 9, Build: func(uint64) ([]port.Op, error) { return manyPuts(100), nil }},
	} {
		_, err := st.Commit(context.Background(), tx)
		if err == nil || errors.Is(err, port.ErrUnavailable) {
			t.Fatalf("%s: %v, want a rejection", name, err)
		}
		if _, ok := port.FailedOp(err); ok {
			t.Fatalf("%s: reported as a condition failure", name)
		}
	}
	if n := len(f.calls()); n != 0 {
		t.Fatalf("%d malformed transactions were sent", n)
	}
	_, err := st.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) { return []port.Op{put("p", "a"), put("p", "a")}, nil }})
	if !errors.Is(err, kv.ErrDuplicateKey) || !errors.Is(err, kv.ErrInvalidTx) {
		t.Fatalf("duplicate key: %v, want kv.ErrDuplicateKey", err)
	}
}

func manyPuts(n int) []port.Op {
	o := make([]port.Op, n)
	for i := range o {
		o[i] = put("many", strings.Repeat("k", 1+i))
	}
	return o
}

// Reads retry transient failures too, and give up with port.ErrUnavailable.
func TestGetRetriesTransient(t *testing.T) {
	opts := fast
	opts.Retries = 2
	f, st, _ := newFaulty(t, opts)
	f.get = func(n int) error {
		if n <= 2 {
			return apiError("ProvisionedThroughputExceededException")
		}
		return nil
	}
	if _, _, err := st.Get(context.Background(), port.Key{PK: "p", SK: "a"}); err != nil {
		t.Fatalf("get after two throttles: %v", err)
	}
	f.get = func(n int) error {
		if n <= 4 {
			return lostBodyError()
		}
		return nil
	}
	if _, _, err := st.Get(context.Background(), port.Key{PK: "p", SK: "a"}); err != nil {
		t.Fatalf("get after a response whose body was lost: %v", err)
	}
	f.get = func(int) error { return httpError(500) }
	if _, _, err := st.Get(context.Background(), port.Key{PK: "p", SK: "a"}); !errors.Is(err, port.ErrUnavailable) {
		t.Fatalf("get: %v, want ErrUnavailable", err)
	}
	f.get = func(int) error { return apiError("ValidationException") }
	if _, _, err := st.Get(context.Background(), port.Key{PK: "p", SK: "a"}); err == nil || errors.Is(err, port.ErrUnavailable) {
		t.Fatalf("get: %v, want a permanent error", err)
	}
}

// OnUsage sees every request: DynamoDB's figures when it reports them, the size-based estimate otherwise.
func TestUsageReported(t *testing.T) {
	var mu sync.Mutex
	var seen []dynamo.Usage
	opts := fast
	opts.OnUsage = func(u dynamo.Usage) { mu.Lock(); seen = append(seen, u); mu.Unlock() }
	f, st, _ := newFaulty(t, opts)
	ctr := port.Key{PK: "sp", SK: "SEQ"}
	big := port.Item{Key: port.Key{PK: "p", SK: "big"}, Data: make([]byte, 3000)} // 3 KB: 6 transactional units
	if _, err := st.Commit(context.Background(), port.Tx{Counter: &ctr, Count: 1, Max: 9, Build: func(uint64) ([]port.Op, error) {
		return []port.Op{port.Put(big, port.NotExists())}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Query(context.Background(), port.Query{PK: "p"}); err != nil {
		t.Fatal(err)
	}
	want := []dynamo.Usage{
		{Operation: "GetItem", Items: 0, ReadUnits: 1},                 // the absent counter
		{Operation: "TransactWriteItems", Items: 2, WriteUnits: 2 + 6}, // counter update + 3 KB put
		{Operation: "Query", Items: 1, ReadUnits: 1},                   // 3 KB < 4 KB
	}
	if len(seen) != len(want) {
		t.Fatalf("usage %+v, want %+v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("usage %d: %+v, want %+v", i, seen[i], want[i])
		}
	}
	// Reported capacity replaces the estimate.
	f.tx = func(int, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		return &dynamodb.TransactWriteItemsOutput{ConsumedCapacity: []types.ConsumedCapacity{
			{TableName: aws.String(st.Table()), CapacityUnits: aws.Float64(10), WriteCapacityUnits: aws.Float64(10)}}}, nil
	}
	seen = nil
	if _, err := st.Commit(context.Background(), port.Tx{Build: func(uint64) ([]port.Op, error) { return []port.Op{put("p", "z")}, nil }}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || !seen[0].Reported || seen[0].WriteUnits != 10 {
		t.Fatalf("usage %+v, want reported 10 write units", seen)
	}
}
