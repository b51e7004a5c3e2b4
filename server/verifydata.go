package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/internal/platform"
	"github.com/waypost/waypost/store/fsblob"
	"github.com/waypost/waypost/store/pebble"
)

// ErrNoData reports a directory that holds no data directory of this build.
var ErrNoData = errors.New("not a waypost data directory")

// VerifyData runs domain.Service.Verify over a data directory that no server is using (a stopped server's,
// or a backup): every reference checked against the blob files by size and SHA-256. It changes no record
// and no blob (opening the item store may write the engine's own log and manifest files).
func VerifyData(ctx context.Context, dir string, opts domain.VerifyOptions, report func(domain.VerifyFinding)) (domain.VerifyReport, error) {
	b, err := os.ReadFile(filepath.Join(dir, formatFile))
	if errors.Is(err, os.ErrNotExist) {
		return domain.VerifyReport{}, fmt.Errorf("%w: %s has no %s file", ErrNoData, dir, formatFile)
	}
	if err != nil {
		return domain.VerifyReport{}, err
	}
	if got := strings.TrimSpace(string(b)); got != DataFormat {
		return domain.VerifyReport{}, fmt.Errorf("%w: %s is of format %q, this build reads %q", ErrDataFormat, dir, got, DataFormat)
	}
	st, err := pebble.Open(filepath.Join(dir, "items"), pebble.Options{LockTimeout: time.Second, NoRoomCheck: true})
	if err != nil {
		return domain.VerifyReport{}, fmt.Errorf("opening %s (a running server holds it: verify a backup of it, or stop the server): %w", dir, err)
	}
	defer st.Close()
	blobs, err := fsblob.New(filepath.Join(dir, "blobs"))
	if err != nil {
		return domain.VerifyReport{}, err
	}
	return VerifyStores(ctx, st, blobs, opts, report)
}

// VerifyStores runs domain.Service.Verify over any item store and blob store (the embedded ones, or a
// DynamoDB table and an S3 bucket).
func VerifyStores(ctx context.Context, st port.ItemStore, blobs port.BlobStore, opts domain.VerifyOptions, report func(domain.VerifyFinding)) (domain.VerifyReport, error) {
	ids := platform.IDs{}
	key := make([]byte, 32) // Verify reads no cursor
	if err := ids.Random(key); err != nil {
		return domain.VerifyReport{}, err
	}
	svc, err := domain.New(domain.Config{Store: st, Blobs: blobs, Clock: platform.Clock{}, IDs: ids, CursorKey: key})
	if err != nil {
		return domain.VerifyReport{}, err
	}
	return svc.Verify(ctx, opts, report)
}
