package dynamo_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
)

// TestDeleteSpaceLeavesNoItem: after a space is deleted, a scan of the whole table finds nothing of it but
// its tombstone, deletion marker, index entry and creation record — also the items the store keeps beside
// the transactions' own: a void visible_seq slot (a send whose commit failed its generation check after
// reserving) and the watermark.
func TestDeleteSpaceLeavesNoItem(t *testing.T) {
	srv := dynamotest.New(t)
	table := srv.Table(t)
	api := &failOnce{API: srv.Client}
	st, err := dynamo.New(api, table, dynamo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := domaintest.New(t, func(t testing.TB) domaintest.Backend {
		return domaintest.Backend{Store: st, Blobs: domaintest.TempBlobs(t)}
	}, nil)
	ctx := context.Background()
	sp := f.Space().SpaceID
	a, b := f.Party(sp), f.Party(sp)
	f.Send(a.P, "first", b.ActorID)
	// The next send's transaction fails after its value was reserved: the store voids the slot; the retry
	// with the same request ID commits under a new value.
	api.armed.Store(true)
	req := domain.SendRequest{RequestID: "second", RecipientIDs: []string{b.ActorID}, Body: &domain.MessageBody{Text: "second"}}
	if _, err := f.Svc.SendMessage(ctx, a.P, req); err == nil {
		t.Fatal("the failed transaction committed")
	}
	second := domaintest.Must[domain.SendResult](t)(f.Svc.SendMessage(ctx, a.P, req))
	if second.VisibleSeq == "2" {
		t.Fatalf("the second send took value 2: no void slot to clean (%+v)", second)
	}
	domaintest.Must[domain.SpaceResult](t)(f.Svc.DeleteSpace(ctx, sp))
	run := domaintest.Must[domain.DeletionRun](t)(f.Svc.ContinueDeletions(ctx, domain.DeletionOptions{}))
	if len(run.Completed) != 1 {
		t.Fatalf("deletion: %+v", run)
	}
	out, err := srv.Client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range out.Items {
		pk := item[dynamo.AttrPK].(*types.AttributeValueMemberS).Value
		sk := item[dynamo.AttrSK].(*types.AttributeValueMemberS).Value
		if !strings.Contains(pk+"|"+sk, sp) {
			continue
		}
		switch {
		case pk == "SP#"+sp && (sk == "META" || sk == "DELETING"), pk == "SX" && sk == sp, strings.HasPrefix(pk, "ID#_#"):
		default:
			t.Errorf("left after the deletion: %s|%s %v", pk, sk, item)
		}
	}
}

// failOnce fails the first transaction that fills a feed slot after it is armed, with an error the store
// does not retry.
type failOnce struct {
	dynamo.API
	armed atomic.Bool
}

func (f *failOnce) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	for _, it := range in.TransactItems {
		if it.Put == nil {
			continue
		}
		if pk, ok := it.Put.Item[dynamo.AttrPK].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, "FD#") &&
			f.armed.CompareAndSwap(true, false) {
			return nil, &types.ResourceNotFoundException{Message: aws.String("injected")}
		}
	}
	return f.API.TransactWriteItems(ctx, in, optFns...)
}
