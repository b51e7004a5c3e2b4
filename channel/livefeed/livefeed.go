// Package livefeed connects the domain's live-feed ports to channel hubs: committers announce
// {visible_seq, item_id} on the space's "feed" channel after each commit (port.Notifier, best effort), and
// feed.wait subscribes to it (port.FeedWatcher). One hub per space is the channel spec's "instance".
package livefeed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/waypost/waypost/channel"
	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/domain/port"
)

// ChannelName is the channel that carries a space's feed announcements. The spec asks for a bounded set of
// fixed names: one per space.
const ChannelName = "feed"

// Hubs returns the hub of a space.
type Hubs interface {
	HubFor(spaceID string) *channel.Hub
}

// Feed implements port.Notifier and port.FeedWatcher over in-process hubs.
type Feed struct {
	hubs Hubs
	log  *slog.Logger
}

// New returns a Feed over hubs.
func New(hubs Hubs, log *slog.Logger) *Feed {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Feed{hubs: hubs, log: log}
}

// announcement is the text published per committed item (visible_seq as a decimal string, as on the wire).
type announcement struct {
	VisibleSeq string `json:"visible_seq"`
	ItemID     string `json:"item_id"`
}

// Encode returns the channel text announcing a committed item.
func Encode(p port.Published) string {
	b, _ := json.Marshal(announcement{VisibleSeq: strconv.FormatUint(p.VisibleSeq, 10), ItemID: p.ItemID})
	return string(b)
}

// Decode parses an announcement text.
func Decode(spaceID, text string) (port.Published, error) {
	var a announcement
	if err := json.Unmarshal([]byte(text), &a); err != nil {
		return port.Published{}, fmt.Errorf("livefeed: decoding announcement: %w", err)
	}
	seq, err := strconv.ParseUint(a.VisibleSeq, 10, 64)
	if err != nil {
		return port.Published{}, fmt.Errorf("livefeed: announcement visible_seq: %w", err)
	}
	return port.Published{SpaceID: spaceID, VisibleSeq: seq, ItemID: a.ItemID}, nil
}

// Notify publishes each item on its space's feed channel. Failures are logged, never returned: losing an
// announcement only delays a waiter until its timeout or the next announcement.
func (f *Feed) Notify(ctx context.Context, items []port.Published) {
	for _, it := range items {
		if _, err := f.hubs.HubFor(it.SpaceID).Publish(ChannelName, Encode(it)); err != nil {
			f.log.LogAttrs(ctx, slog.LevelWarn, "livefeed: announcing failed", slog.String("space_id", it.SpaceID), slog.String("error", err.Error()))
		}
	}
}

// Watch subscribes to a space's announcements in a scope of its own, ended by Close.
func (f *Feed) Watch(ctx context.Context, spaceID string) (port.Watch, error) {
	scope := f.hubs.HubFor(spaceID).NewScope(ctx)
	h, err := scope.Subscribe(ChannelName)
	if err != nil {
		scope.End()
		if errors.Is(err, channel.ErrTooManySubscriptions) || errors.Is(err, channel.ErrTooManyChannels) {
			return nil, domain.Errorf(domain.CodeRateLimited, "too many live waiters in this space; retry or poll with inbox.read")
		}
		return nil, fmt.Errorf("livefeed: subscribing: %w", err)
	}
	return &watch{space: spaceID, scope: scope, handle: h}, nil
}

type watch struct {
	space  string
	scope  *channel.Scope
	handle string
}

// Next waits for the next announcement.
func (w *watch) Next(ctx context.Context, timeout time.Duration) (port.Published, port.WatchStatus, error) {
	if max := channel.DefaultMaxWaitTimeout; timeout > max {
		timeout = max
	}
	st, text, err := w.scope.Wait(ctx, w.handle, timeout)
	if err != nil {
		if ctx.Err() != nil {
			return port.Published{}, port.WatchTimeout, nil
		}
		return port.Published{}, port.WatchEnded, fmt.Errorf("livefeed: waiting: %w", err)
	}
	switch st {
	case channel.StatusMessage:
		p, err := Decode(w.space, text)
		if err != nil {
			return port.Published{}, port.WatchEnded, nil // unreadable: re-read the durable feed
		}
		return p, port.WatchAnnounced, nil
	case channel.StatusTimeout:
		return port.Published{}, port.WatchTimeout, nil
	default:
		return port.Published{}, port.WatchEnded, nil
	}
}

// Close ends the watch's scope, cancelling its subscription.
func (w *watch) Close() { w.scope.End() }
