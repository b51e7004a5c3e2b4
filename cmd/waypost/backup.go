package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/spf13/cobra"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/server"
	"github.com/waypost/waypost/store/dynamo"
	"github.com/waypost/waypost/store/s3blob"
)

func newBackupCmd() *cobra.Command {
	c := &conn{}
	cmd := &cobra.Command{
		Use:   "backup DIR",
		Short: "Take a consistent online backup of a running embedded server's data into DIR",
		Long: `Ask the running 'waypost serve' for a copy of its data directory in DIR, while it keeps serving: a
checkpoint of the item store (every commit answered before it, none after) and a copy of every blob file
it references, with the secrets (cursor key, admin secret) and a BACKUP marker. DIR is a path on the
server's host (made absolute here), absent or empty, outside the data directory; keep it as private as the
data directory (mode 0700).

To restore, stop the server and start 'waypost serve --data DIR' (or copy DIR in place of the data
directory). The first start of a backup runs 'waypost verify' over it and refuses to serve a restore that
misses a referenced blob or holds one whose bytes changed, naming each unreadable resource.

The AWS deployment is backed up differently: DynamoDB point-in-time recovery and S3 versioning
(docs/operations.md); 'waypost verify --table … --bucket …' checks a restore there.`,
		Example: `  waypost backup /var/backups/waypost-$(date +%F)
  waypost verify --data /var/backups/waypost-2026-12-01`,
		Args: exactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			ad, err := c.admin(cmd)
			if err != nil {
				return err
			}
			res, err := ad.Backup(cmd.Context(), dir)
			if err != nil {
				return err
			}
			return c.show(cmd, res, func(w io.Writer) error {
				return fields(w, "dir", fmt.Sprint(res["dir"]), "taken_at", fmt.Sprint(res["taken_at"]),
					"objects", fmt.Sprint(res["objects"]), "object_bytes", fmt.Sprint(res["object_bytes"]), "duration_ms", fmt.Sprint(res["duration_ms"]))
			})
		},
	}
	c.addAdminFlags(cmd.Flags())
	return withUsageErrors(cmd)
}

func newVerifyCmd() *cobra.Command {
	var data, table, bucket, prefix, region, dynamoEndpoint, s3Endpoint string
	var spaces []string
	var headOnly, asJSON bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check every reference of the stored data against the blob store (a backup, a restore, a stopped server)",
		Long: `Check metadata and blobs together (RFC §19.2): every message's body (inline, against the digest recorded at
commit, or its body object) and attachments, every memory revision's state and the blob of each of its
items, and every sealed blob (manifests included) — each object read and checked by size and SHA-256.
Each unreadable resource is printed on one line (space, kind, id, problem, the blob it needs), and the
command exits with status 1 if there is any; 0 means every reference is readable. Spaces being deleted
or deleted are skipped.

Embedded: --data DIR, a data directory no server is using (a backup, or a stopped server's).
AWS: --table and --bucket (with --blob-prefix when the deployment sets one), read with the usual AWS
credentials and region; it reads every object, so prefer --head-only on large buckets (S3's recorded
SHA-256 instead of the bytes).`,
		Example: `  waypost verify --data /var/backups/waypost-2026-12-01
  waypost verify --table waypost-prod --bucket waypost-prod-blobs --head-only`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (data == "") == (table == "" && bucket == "") {
				return usagef("give --data DIR (embedded) or --table and --bucket (AWS)")
			}
			if data == "" && (table == "" || bucket == "") {
				return usagef("--table and --bucket go together")
			}
			opts := domain.VerifyOptions{SpaceIDs: spaces, HeadOnly: headOnly}
			var findings []domain.VerifyFinding
			report := func(f domain.VerifyFinding) {
				if asJSON {
					findings = append(findings, f)
					return
				}
				fmt.Fprintln(cmd.OutOrStdout(), f.String())
			}
			var rep domain.VerifyReport
			var err error
			if data != "" {
				rep, err = server.VerifyData(cmd.Context(), data, opts, report)
			} else {
				rep, err = verifyAWS(cmd.Context(), awsTarget{table, bucket, prefix, region, dynamoEndpoint, s3Endpoint}, opts, report)
			}
			if err != nil {
				return err
			}
			if asJSON {
				if findings == nil {
					findings = []domain.VerifyFinding{}
				}
				if err := printJSON(cmd.OutOrStdout(), map[string]any{"report": rep, "unreadable": findings}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.ErrOrStderr(), "verified %d spaces (%d skipped: deleting or deleted): %d messages, %d memory revisions, %d blobs; "+
					"%d objects, %d bytes read; %d unreadable\n", rep.Spaces, len(rep.SkippedSpaces), rep.Messages, rep.MemoryRevisions,
					rep.Blobs, rep.Objects, rep.ObjectBytes, rep.Unreadable)
			}
			if rep.Unreadable > 0 {
				return fmt.Errorf("%d unreadable resources", rep.Unreadable)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&data, "data", "", "embedded: the data directory (or backup) to check; no server may be using it")
	f.StringVar(&table, "table", "", "AWS: the DynamoDB table")
	f.StringVar(&bucket, "bucket", "", "AWS: the S3 bucket")
	f.StringVar(&prefix, "blob-prefix", "", "AWS: the key prefix of the deployment's objects in the bucket")
	f.StringVar(&region, "region", "", "AWS: the region (default: the AWS configuration's)")
	f.StringVar(&dynamoEndpoint, "dynamodb-endpoint", "", "AWS: another DynamoDB endpoint (tests, emulators)")
	f.StringVar(&s3Endpoint, "s3-endpoint", "", "AWS: another S3 endpoint (tests, emulators; path-style)")
	f.StringSliceVar(&spaces, "space", nil, "check only these spaces (repeatable; default: every space)")
	f.BoolVar(&headOnly, "head-only", false, "compare each object's size and SHA-256 as the store recorded them, without reading its bytes")
	f.BoolVar(&asJSON, "json", false, "print the report and the unreadable resources as one JSON object")
	return withUsageErrors(cmd)
}

// awsTarget names the table and bucket of an AWS deployment.
type awsTarget struct {
	table, bucket, prefix, region, dynamoEndpoint, s3Endpoint string
}

// verifyAWS runs Verify over a deployment's table and bucket with the default AWS configuration.
func verifyAWS(ctx context.Context, t awsTarget, opts domain.VerifyOptions, report func(domain.VerifyFinding)) (domain.VerifyReport, error) {
	var load []func(*awsconfig.LoadOptions) error
	if t.region != "" {
		load = append(load, awsconfig.WithRegion(t.region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return domain.VerifyReport{}, fmt.Errorf("AWS configuration: %w", err)
	}
	st, err := dynamo.New(dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(t.dynamoEndpoint)), t.table, dynamo.Options{})
	if err != nil {
		return domain.VerifyReport{}, err
	}
	blobs, err := s3blob.New(s3.NewFromConfig(cfg, s3blob.ClientOptions(t.s3Endpoint)), t.bucket, s3blob.Options{Prefix: t.prefix})
	if err != nil {
		return domain.VerifyReport{}, err
	}
	return server.VerifyStores(ctx, st, blobs, opts, report)
}
