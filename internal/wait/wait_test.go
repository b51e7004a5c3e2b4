package wait_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/waypost/waypost/internal/wait"
)

func TestSleep(t *testing.T) {
	t.Parallel()
	if err := wait.Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("a short sleep: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := wait.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) > time.Minute {
		t.Errorf("an ended context: %v after %s", err, time.Since(start))
	}
	if err := wait.Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("zero on an ended context: %v", err)
	}
}
