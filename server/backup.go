package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/internal/dirsync"
	"github.com/waypost/waypost/store/fsblob"
)

// Backup and restore of the embedded deployment (RFC §19.2: metadata and blobs backed up together, and a
// restore verified before it is served).
//
// Backup takes, while the server keeps serving, a checkpoint of the item store (a consistent point in time:
// every commit answered before it, none after) and then copies the blob files. Blobs are create-only and a
// commit that references one is made only after its bytes are stored, so every object the checkpoint
// references is already on disk when the copy starts; the only code that removes referenced objects, the
// space deletion worker, is held off until the copy is done. The backup directory is a data directory of
// its own (FORMAT, items/, blobs/, the secrets), marked by a BACKUP file: `waypost serve --data DIR` on it
// first runs Verify and refuses to serve a restore with unreadable resources.

// backupMarker names the file that marks a data directory as a backup not yet verified.
const backupMarker = "BACKUP"

// verifiedMarker names the file that records the verification of a restored backup.
const verifiedMarker = "RESTORE-VERIFIED"

// secretFiles are the generated secrets a backup carries (those that exist).
var secretFiles = []string{"admin-secret", "cursor-key", "channel-secret"}

// BackupResult describes a backup.
type BackupResult struct {
	Dir     string    `json:"dir"`
	TakenAt time.Time `json:"taken_at"`
	// Objects and ObjectBytes count the blob files copied (message bodies, blobs, memory states).
	Objects     int64 `json:"objects"`
	ObjectBytes int64 `json:"object_bytes"`
	// DurationMS is how long the backup took.
	DurationMS int64 `json:"duration_ms"`
}

// ErrBackupTarget reports a backup directory that cannot be used (not absolute, not empty).
var ErrBackupTarget = errors.New("unusable backup directory")

// Backup writes a consistent copy of the data directory into dir (absolute; absent or empty), online.
func (s *Server) Backup(ctx context.Context, dir string) (BackupResult, error) {
	start := time.Now()
	if !filepath.IsAbs(dir) {
		return BackupResult{}, fmt.Errorf("%w: %q is not an absolute path", ErrBackupTarget, dir)
	}
	dir = filepath.Clean(dir)
	data, err := filepath.Abs(s.cfg.DataDir)
	if err != nil {
		return BackupResult{}, fmt.Errorf("server: backup: %w", err)
	}
	if dir == data || strings.HasPrefix(dir, data+string(filepath.Separator)) {
		return BackupResult{}, fmt.Errorf("%w: %s is inside the data directory %s", ErrBackupTarget, dir, data)
	}
	if err := makeEmptyDir(dir); err != nil {
		return BackupResult{}, err
	}
	// Hold the deletion worker off: it is the only writer that removes objects a commit references.
	s.deletions.mu.Lock()
	defer s.deletions.mu.Unlock()
	res := BackupResult{Dir: dir, TakenAt: time.Now().UTC()}
	if err := writeFileSync(filepath.Join(dir, formatFile), []byte(DataFormat+"\n")); err != nil {
		return res, fmt.Errorf("server: backup: %w", err)
	}
	for _, name := range secretFiles {
		if _, err := copyFile(filepath.Join(s.cfg.DataDir, name), filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return res, fmt.Errorf("server: backup: %w", err)
		}
	}
	if err := s.store.Checkpoint(filepath.Join(dir, "items")); err != nil {
		return res, fmt.Errorf("server: backup: %w", err)
	}
	if res.Objects, res.ObjectBytes, err = copyTree(ctx, filepath.Join(s.cfg.DataDir, "blobs"), filepath.Join(dir, "blobs")); err != nil {
		return res, fmt.Errorf("server: backup: copying blobs: %w", err)
	}
	res.DurationMS = time.Since(start).Milliseconds()
	marker, err := json.MarshalIndent(map[string]any{"format": DataFormat, "taken_at": res.TakenAt, "source": data,
		"objects": res.Objects, "object_bytes": res.ObjectBytes}, "", "  ")
	if err != nil {
		return res, err
	}
	if err := writeFileSync(filepath.Join(dir, backupMarker), append(marker, '\n')); err != nil {
		return res, fmt.Errorf("server: backup: %w", err)
	}
	s.cfg.Logger.Info("backup", "dir", dir, "objects", res.Objects, "object_bytes", res.ObjectBytes, "duration", time.Since(start).String())
	return res, nil
}

// makeEmptyDir creates dir (mode 0700) or accepts it when it exists and is empty.
func makeEmptyDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("server: backup: %w", err)
	}
	err := os.Mkdir(dir, 0o700)
	if err == nil || !errors.Is(err, fs.ErrExist) {
		return err
	}
	entries, rerr := os.ReadDir(dir)
	if rerr != nil {
		return fmt.Errorf("%w: %v", ErrBackupTarget, rerr)
	}
	if len(entries) > 0 {
		return fmt.Errorf("%w: %s is not empty", ErrBackupTarget, dir)
	}
	return nil
}

// copyTree copies the object files under src (temporary files of puts in progress aside) into dst, each
// file and each directory synced; it returns how many files and bytes it copied.
func copyTree(ctx context.Context, src, dst string) (files, size int64, err error) {
	var dirs []string
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			dirs = append(dirs, target)
			return os.MkdirAll(target, 0o700)
		case !d.Type().IsRegular() || fsblob.IsTemporary(d.Name()):
			return nil
		}
		n, err := copyFile(path, target)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed since the walk listed it: an expired upload's bytes, never referenced
		}
		files, size = files+1, size+n
		return err
	})
	if err != nil {
		return files, size, err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := dirsync.Sync(dirs[i]); err != nil {
			return files, size, err
		}
	}
	return files, size, nil
}

// copyFile copies src to a new file dst (mode 0600), synced, and returns its size.
func copyFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// ErrUnreadableRestore reports a restored backup whose verification found unreadable resources.
var ErrUnreadableRestore = errors.New("the restored backup has unreadable resources")

// verifyRestore runs Verify over a data directory marked as a backup, before it is served. A clean result
// replaces the marker with a record of the verification; unreadable resources refuse the start (unless
// allowed), naming the first of them.
func (s *Server) verifyRestore(ctx context.Context) error {
	marker := filepath.Join(s.cfg.DataDir, backupMarker)
	if _, err := os.Stat(marker); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	var found []domain.VerifyFinding
	rep, err := s.svc.Verify(ctx, domain.VerifyOptions{}, func(f domain.VerifyFinding) {
		if len(found) < 20 {
			found = append(found, f)
		}
	})
	if err != nil {
		return fmt.Errorf("server: verifying the restored backup: %w", err)
	}
	if rep.Unreadable > 0 {
		lines := make([]string, len(found))
		for i, f := range found {
			lines[i] = "  " + f.String()
		}
		if !s.cfg.AllowUnreadable {
			return fmt.Errorf("server: %w: %d unreadable (first %d below); `waypost verify --data %s` lists them all. "+
				"Restore the missing blob files, or start with --allow-unreadable to serve the rest (those resources then fail to read):\n%s",
				ErrUnreadableRestore, rep.Unreadable, len(found), s.cfg.DataDir, strings.Join(lines, "\n"))
		}
		s.cfg.Logger.Error("serving a restored backup with unreadable resources (--allow-unreadable)", "unreadable", rep.Unreadable,
			"first", strings.Join(lines, "; "))
		return nil // the marker stays: every start reports them again
	}
	record, _ := json.MarshalIndent(map[string]any{"verified_at": time.Now().UTC(), "report": rep}, "", "  ")
	_ = os.Remove(filepath.Join(s.cfg.DataDir, verifiedMarker+".tmp")) // left by a crash during an earlier start
	if err := writeFileSync(filepath.Join(s.cfg.DataDir, verifiedMarker+".tmp"), append(record, '\n')); err != nil {
		return fmt.Errorf("server: recording the verification: %w", err)
	}
	if err := os.Rename(filepath.Join(s.cfg.DataDir, verifiedMarker+".tmp"), filepath.Join(s.cfg.DataDir, verifiedMarker)); err != nil {
		return fmt.Errorf("server: recording the verification: %w", err)
	}
	if err := os.Remove(marker); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.cfg.Logger.Info("restored backup verified", "messages", rep.Messages, "memory_revisions", rep.MemoryRevisions,
		"blobs", rep.Blobs, "objects", rep.Objects)
	return dirsync.Sync(s.cfg.DataDir)
}
