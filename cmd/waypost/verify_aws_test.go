package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/domaintest"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/dynamo/dynamotest"
	"github.com/waypost/waypost/store/s3blob"
	"github.com/waypost/waypost/store/s3blob/s3test"
)

// TestVerifyTableAndBucket: `waypost verify --table --bucket` checks an AWS deployment's DynamoDB table and
// S3 bucket (here minidyn and versitygw): clean, it exits 0; after one blob's object is deleted it exits 1
// and lists that blob and the message that attaches it, reading every object or only their recorded digests.
func TestVerifyTableAndBucket(t *testing.T) {
	e := s3test.Require(t)
	srv := dynamotest.New(t)
	table, bucket := srv.Table(t), e.Bucket(t)
	const prefix = "deploy/"
	st, err := dynamo.New(srv.Client, table, dynamo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := s3blob.New(e.Client(), bucket, s3blob.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	f := domaintest.New(t, func(testing.TB) domaintest.Backend { return domaintest.Backend{Store: st, Blobs: blobs} },
		func(c *domain.Config) { c.InlineBodyMax = 64 })
	ctx := context.Background()
	sp := f.Space().SpaceID
	a, b := f.Party(sp), f.Party(sp)
	text := "an attachment"
	sum := sha256.Sum256([]byte(text))
	prep := domaintest.Must[domain.BlobPrepareResult](t)(f.Svc.PrepareBlob(ctx, a.P, domain.BlobPrepareRequest{RequestID: "bp",
		ContentType: "text/plain", SizeBytes: int64(len(text)), SHA256: hex.EncodeToString(sum[:])}))
	domaintest.Must[domain.UploadResult](t)(f.Svc.Upload(ctx, a.P, prep.UploadID, "text/plain", int64(len(text)), strings.NewReader(text)))
	domaintest.Must[domain.BlobInfo](t)(f.Svc.CommitBlob(ctx, a.P, domain.BlobCommitRequest{RequestID: "bc", UploadID: prep.UploadID}))
	msg := domaintest.Must[domain.SendResult](t)(f.Svc.SendMessage(ctx, a.P, domain.SendRequest{RequestID: "m", RecipientIDs: []string{b.ActorID},
		Body: &domain.MessageBody{Text: strings.Repeat("a body in S3 ", 20)}, AttachmentIDs: []string{prep.BlobID}}))

	t.Setenv("AWS_ACCESS_KEY_ID", e.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", e.SecretKey)
	t.Setenv("AWS_REGION", e.Region)
	verify := func(extra ...string) (string, string, error) {
		root := newRoot()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(append([]string{"verify", "--table", table, "--bucket", bucket, "--blob-prefix", prefix,
			"--dynamodb-endpoint", srv.URL, "--s3-endpoint", e.Endpoint}, extra...))
		err := root.ExecuteContext(ctx)
		return out.String(), errOut.String(), err
	}
	if out, errOut, err := verify(); err != nil || out != "" || !strings.Contains(errOut, "verified 1 spaces") || !strings.Contains(errOut, "0 unreadable") {
		t.Fatalf("verify of a clean deployment: %v\n%s%s", err, out, errOut)
	}
	if err := blobs.Delete(ctx, "spaces/"+sp+"/blobs/"+prep.BlobID); err != nil {
		t.Fatal(err)
	}
	for _, mode := range [][]string{nil, {"--head-only"}} {
		out, errOut, err := verify(append(mode, "--json")...)
		if err == nil {
			t.Fatalf("%v: verify with a missing object exited 0:\n%s", mode, out)
		}
		var res struct {
			Unreadable []domain.VerifyFinding `json:"unreadable"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v: %v\n%s%s", mode, err, out, errOut)
		}
		var got []string
		for _, f := range res.Unreadable {
			got = append(got, f.Kind+" "+f.ID+" "+f.Problem)
		}
		want := "blob " + prep.BlobID + " missing_object|message " + msg.MessageID + " blob_unreadable"
		if strings.Join(got, "|") != want {
			t.Errorf("%v: verify listed %q, want %q", mode, got, want)
		}
	}
}
