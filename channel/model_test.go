package channel_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/waypost/waypost/channel"
)

// refSub is one subscription of the reference model.
type refSub struct {
	scope    int
	name     string
	queue    []string
	bytes    int
	ended    bool
	reason   string
	attached bool
}

// refHub is a sequential reference model of the specification, written
// independently of the hub's data structures: plain slices, no locks.
type refHub struct {
	limits     channel.Limits
	channels   map[string][]int // subscription ids in subscription order
	subs       []*refSub
	scopeEnded []bool
}

func validRefName(name string) bool {
	if len(name) < 1 || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !strings.ContainsRune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-", r) {
			return false
		}
	}
	return true
}

func (m *refHub) detach(id int, reason string, drop bool) {
	s := m.subs[id]
	if s.attached {
		s.attached = false
		ids := m.channels[s.name]
		for i, x := range ids {
			if x == id {
				ids = append(ids[:i:i], ids[i+1:]...)
				break
			}
		}
		if len(ids) == 0 {
			delete(m.channels, s.name)
		} else {
			m.channels[s.name] = ids
		}
	}
	if drop {
		s.queue, s.bytes = nil, 0
	}
	if !s.ended {
		s.ended, s.reason = true, reason
	}
}

func (m *refHub) subscribe(scope int, name string) (int, error) {
	switch {
	case !validRefName(name):
		return -1, channel.ErrInvalidName
	case m.scopeEnded[scope]:
		return -1, channel.ErrScopeEnded
	}
	ids, ok := m.channels[name]
	if !ok && len(m.channels) >= m.limits.MaxChannels {
		return -1, channel.ErrTooManyChannels
	}
	if len(ids) >= m.limits.MaxSubscriptionsPerChannel {
		return -1, channel.ErrTooManySubscriptions
	}
	m.subs = append(m.subs, &refSub{scope: scope, name: name, attached: true})
	id := len(m.subs) - 1
	m.channels[name] = append(ids, id)
	return id, nil
}

func (m *refHub) publish(name, text string) (int, error) {
	switch {
	case !validRefName(name):
		return 0, channel.ErrInvalidName
	case len(text) > m.limits.MaxTextBytes:
		return 0, channel.ErrTextTooLarge
	case strings.HasPrefix(text, "\xff"):
		return 0, channel.ErrInvalidText
	}
	n := 0
	for _, id := range append([]int(nil), m.channels[name]...) {
		s := m.subs[id]
		if s.bytes+len(text) > m.limits.MaxBacklogBytes || len(s.queue)+1 > m.limits.MaxBacklogBytes {
			m.detach(id, m.limits.BacklogReason(), true)
			continue
		}
		s.queue = append(s.queue, text)
		s.bytes += len(text)
		n++
	}
	return n, nil
}

func (m *refHub) wait(id int) (channel.Status, string) {
	s := m.subs[id]
	if len(s.queue) > 0 {
		text := s.queue[0]
		s.queue = s.queue[1:]
		s.bytes -= len(text)
		return channel.StatusMessage, text
	}
	if s.ended {
		return channel.StatusEnded, s.reason
	}
	return channel.StatusTimeout, ""
}

func (m *refHub) close(name, reason string) (int, error) {
	switch {
	case !validRefName(name):
		return 0, channel.ErrInvalidName
	case len(reason) > m.limits.MaxReasonBytes:
		return 0, channel.ErrReasonTooLarge
	}
	ids := append([]int(nil), m.channels[name]...)
	for _, id := range ids {
		m.detach(id, reason, false)
	}
	return len(ids), nil
}

func (m *refHub) count(name string) (int, error) {
	if !validRefName(name) {
		return 0, channel.ErrInvalidName
	}
	return len(m.channels[name]), nil
}

func (m *refHub) endScope(scope int) {
	if m.scopeEnded[scope] {
		return
	}
	m.scopeEnded[scope] = true
	for id, s := range m.subs {
		if s.scope == scope {
			m.detach(id, channel.ReasonScopeEnded, true)
		}
	}
}

// sameErr reports whether got matches the model's expected sentinel.
func sameErr(got, want error) bool {
	if want == nil {
		return got == nil
	}
	return errors.Is(got, want)
}

// TestModelMatchesReference drives the hub and the reference model with the
// same random operation sequence (all non-blocking: waits use timeout 0) and
// requires identical results after every step. Limits are drawn too, so that
// channel, subscription, text, reason and backlog limits are all reached;
// a "flood" action publishes runs of maximum-size texts to build backlogs near
// 1 MiB under the default limits. Reproduce a failure with the printed
// -rapid.seed.
func TestModelMatchesReference(t *testing.T) {
	base := strings.Repeat("abcdefghij", 7000) // 70,000 bytes, sliced into texts
	rapid.Check(t, func(t *rapid.T) {
		limits := channel.DefaultLimits()
		if rapid.Bool().Draw(t, "smallLimits") {
			limits = channel.Limits{
				MaxChannels:                rapid.IntRange(1, 3).Draw(t, "maxChannels"),
				MaxSubscriptionsPerChannel: rapid.IntRange(1, 3).Draw(t, "maxSubs"),
				MaxBacklogBytes:            rapid.IntRange(1, 64).Draw(t, "maxBacklog"),
				MaxTextBytes:               rapid.IntRange(1, 40).Draw(t, "maxText"),
				MaxReasonBytes:             rapid.IntRange(1, 8).Draw(t, "maxReason"),
				MaxWaitTimeout:             time.Second,
			}
		}
		hub := channel.NewHub(limits)
		limits = hub.Limits()
		ref := &refHub{limits: limits, channels: map[string][]int{}}
		var scopes []*channel.Scope
		var handles []string // by model subscription id
		defer func() {
			for _, sc := range scopes {
				sc.End()
			}
		}()
		names := []string{"a", "b", "c", "D.x:y-z_1", "bad name", ""}
		counter := 0
		makeText := func(size int) string {
			counter++
			p := strconv.Itoa(counter) + "|"
			if size <= len(p) {
				return p[:size]
			}
			return p + base[:size-len(p)]
		}
		sizeGen := rapid.Custom(func(t *rapid.T) int {
			switch rapid.IntRange(0, 5).Draw(t, "sizeKind") {
			case 0:
				return 0
			case 1:
				return rapid.IntRange(1, 16).Draw(t, "small")
			case 2:
				return limits.MaxTextBytes
			case 3:
				return limits.MaxTextBytes + 1
			case 4:
				return max(limits.MaxTextBytes-1, 0)
			default:
				return rapid.IntRange(0, limits.MaxTextBytes).Draw(t, "any")
			}
		})
		newScope := func() {
			scopes = append(scopes, hub.NewScope(context.Background()))
			ref.scopeEnded = append(ref.scopeEnded, false)
		}
		newScope()
		pickScope := func(t *rapid.T) int { return rapid.IntRange(0, len(scopes)-1).Draw(t, "scope") }
		pickName := func(t *rapid.T) string { return rapid.SampledFrom(names).Draw(t, "name") }
		publish := func(t *rapid.T, name, text string) {
			n, err := hub.Publish(name, text)
			wn, werr := ref.publish(name, text)
			if !sameErr(err, werr) || n != wn {
				t.Fatalf("Publish(%q, %d bytes) = %d, %v; model %d, %v", name, len(text), n, err, wn, werr)
			}
		}

		t.Repeat(map[string]func(*rapid.T){
			"newScope": func(t *rapid.T) {
				if len(scopes) >= 5 {
					t.Skip("enough scopes")
				}
				newScope()
			},
			"subscribe": func(t *rapid.T) {
				sc, name := pickScope(t), pickName(t)
				h, err := scopes[sc].Subscribe(name)
				id, werr := ref.subscribe(sc, name)
				if !sameErr(err, werr) {
					t.Fatalf("Subscribe(%q) = %v; model %v", name, err, werr)
				}
				if err == nil {
					if id != len(handles) {
						t.Fatalf("model id %d, handles %d", id, len(handles))
					}
					handles = append(handles, h)
				}
			},
			"publish": func(t *rapid.T) {
				name := pickName(t)
				text := makeText(sizeGen.Draw(t, "size"))
				if rapid.IntRange(0, 9).Draw(t, "ff") == 0 {
					text = "\xff" + text
				}
				publish(t, name, text)
			},
			"flood": func(t *rapid.T) {
				name := pickName(t)
				for range rapid.IntRange(1, 20).Draw(t, "floodCount") {
					publish(t, name, makeText(limits.MaxTextBytes))
				}
			},
			"wait": func(t *rapid.T) {
				if len(handles) == 0 {
					t.Skip("no subscriptions")
				}
				id := rapid.IntRange(0, len(handles)-1).Draw(t, "sub")
				owner := scopes[ref.subs[id].scope]
				if rapid.IntRange(0, 9).Draw(t, "badTimeout") == 0 {
					bad := rapid.SampledFrom([]time.Duration{-1, limits.MaxWaitTimeout + 1}).Draw(t, "timeout")
					if _, _, err := owner.Wait(context.Background(), handles[id], bad); !errors.Is(err, channel.ErrInvalidTimeout) {
						t.Fatalf("Wait(timeout %v) = %v, want ErrInvalidTimeout", bad, err)
					}
					return
				}
				st, text, err := owner.Wait(context.Background(), handles[id], 0)
				wst, wtext := ref.wait(id)
				if err != nil || st != wst || text != wtext {
					t.Fatalf("Wait(sub %d) = (%d, %.30q), %v; model (%d, %.30q)", id, st, text, err, wst, wtext)
				}
			},
			"foreign": func(t *rapid.T) {
				if len(handles) == 0 || len(scopes) < 2 {
					t.Skip("need two scopes and a subscription")
				}
				id := rapid.IntRange(0, len(handles)-1).Draw(t, "sub")
				other := pickScope(t)
				if other == ref.subs[id].scope {
					t.Skip("same scope")
				}
				if _, _, err := scopes[other].Wait(context.Background(), handles[id], 0); !errors.Is(err, channel.ErrForeignHandle) {
					t.Fatalf("foreign Wait = %v", err)
				}
				if err := scopes[other].Unsubscribe(handles[id]); !errors.Is(err, channel.ErrForeignHandle) {
					t.Fatalf("foreign Unsubscribe = %v", err)
				}
			},
			"unsubscribe": func(t *rapid.T) {
				if len(handles) == 0 {
					t.Skip("no subscriptions")
				}
				id := rapid.IntRange(0, len(handles)-1).Draw(t, "sub")
				if err := scopes[ref.subs[id].scope].Unsubscribe(handles[id]); err != nil {
					t.Fatalf("Unsubscribe = %v", err)
				}
				ref.detach(id, channel.ReasonUnsubscribed, true)
			},
			"close": func(t *rapid.T) {
				name := pickName(t)
				reason := rapid.SampledFrom([]string{"", "收摊", "bye", strings.Repeat("r", limits.MaxReasonBytes), strings.Repeat("r", limits.MaxReasonBytes+1)}).Draw(t, "reason")
				n, err := hub.Close(name, reason)
				wn, werr := ref.close(name, reason)
				if !sameErr(err, werr) || n != wn {
					t.Fatalf("Close(%q, %d bytes) = %d, %v; model %d, %v", name, len(reason), n, err, wn, werr)
				}
			},
			"count": func(t *rapid.T) {
				name := pickName(t)
				n, err := hub.Count(name)
				wn, werr := ref.count(name)
				if !sameErr(err, werr) || n != wn {
					t.Fatalf("Count(%q) = %d, %v; model %d, %v", name, n, err, wn, werr)
				}
			},
			"endScope": func(t *rapid.T) {
				sc := pickScope(t)
				scopes[sc].End()
				ref.endScope(sc)
			},
			"": func(t *rapid.T) {
				for _, name := range names {
					n, err := hub.Count(name)
					wn, werr := ref.count(name)
					if !sameErr(err, werr) || n != wn {
						t.Fatalf("invariant: Count(%q) = %d, %v; model %d, %v", name, n, err, wn, werr)
					}
				}
			},
		})
	})
}
