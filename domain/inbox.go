package domain

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/waypost/waypost/domain/port"
)

// ReadRequest is the body of inbox.read (RFC §8.2).
type ReadRequest struct {
	ConsumerID string  `json:"consumer_id"`
	Cursor     *string `json:"cursor,omitempty"`
	Limit      int     `json:"limit,omitempty"`
}

// Page is one page of a consumer's feed (RFC §8.2).
type Page struct {
	Items      []FeedItem `json:"items"`
	NextCursor string     `json:"next_cursor"`
	HasMore    bool       `json:"has_more"`
	// CheckpointCursor is the consumer's stored checkpoint for its current view and rights, if any.
	CheckpointCursor *string `json:"checkpoint_cursor"`
}

// inboxEntryPut writes feed item seq's entry in actor's inbox; data is the item, encoded. Where point reads
// are cheap (port.PointReadCoster) the entry holds no data: the item is stored once, in the space feed's slot
// of the same seq, which every writer of an inbox entry puts in the same transaction, and a read of the inbox
// takes the item from there (merger.resolve). Otherwise it holds a copy, which reads take as it is. The
// entry carries no condition: the slot's NotExists condition in the same transaction (port.Sequence) already
// proves the entry absent, and the embedded store does not read the key again to check it (one read less per
// recipient of a send and per receipt of an ack). docs/decisions.md, "The inbox entry".
func (s *Service) inboxEntryPut(space, actor string, seq uint64, data []byte) port.Op {
	if !s.inboxCopies {
		data = nil
	}
	return port.Put(port.Item{Key: keyInbox(space, actor, seq), Data: data}, port.Cond{})
}

// feedScope is what a consumer may read right now: the consumer, its view and filter, and the principal's
// rights, fixed for one request.
type feedScope struct {
	p        *Principal
	consumer Consumer
	binding  cursorBody // everything a cursor binds except the position
}

func (s *Service) actorIDs(ctx context.Context, space string) ([]string, error) {
	items, err := s.store.Query(ctx, port.Query{PK: "SP#" + space, After: "ACT#", UpTo: "ACT#~", Limit: 1000})
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, it := range items {
		a, err := decodeItem[Actor](it)
		if err != nil {
			return nil, err
		}
		if !a.Revoked {
			out = append(out, a.ActorID)
		}
	}
	return out, nil
}

// consumerScope checks that the principal may read as the consumer and returns the read scope.
func (s *Service) consumerScope(ctx context.Context, p *Principal, consumerID string, need Scope) (feedScope, error) {
	var fs feedScope
	if err := requireScope(p, need); err != nil {
		return fs, err
	}
	notFound := Errorf(CodeNotFound, "no such consumer").WithDetails("consumer_id", consumerID)
	c, ffp, found, err := s.consumer(ctx, p.SpaceID, consumerID)
	if err != nil {
		return fs, err
	}
	if !found || c.ActorID != p.ActorID {
		return fs, notFound
	}
	if p.ConsumerID != "" && p.ConsumerID != consumerID {
		return fs, Errorf(CodeForbidden, "the credential is bound to another consumer")
	}
	if c.View == ViewSpaceLog && !p.CanObserve() {
		return fs, Errorf(CodeForbidden, "a space_log consumer needs the space.observe scope and grant")
	}
	fs = feedScope{p: p, consumer: c, binding: cursorBody{Space: p.SpaceID, Actor: p.ActorID, Consumer: c.ConsumerID,
		ViewRev: c.ViewRevision, FilterFP: ffp, GrantFP: p.grantFingerprint()}}
	return fs, nil
}

// consumer reads a consumer record, and returns it with the fingerprint its cursors bind (the first 32
// hex digits of its normalized filter's); decoded records are kept by their bytes (consumerCache).
func (s *Service) consumer(ctx context.Context, space, consumerID string) (Consumer, string, bool, error) {
	if !ValidID(consumerID) {
		return Consumer{}, "", false, nil
	}
	it, found, err := getItem(ctx, s.store, keyConsumer(space, consumerID))
	if err != nil || !found {
		return Consumer{}, "", false, err
	}
	if e, ok := s.consumers.get(it.Data); ok {
		return e.c, e.filterFP, true, nil
	}
	c, err := decodeItem[Consumer](it)
	if err != nil {
		return Consumer{}, "", false, err
	}
	ffp, err := Fingerprint(c.Filter.Normalize())
	if err != nil {
		return Consumer{}, "", false, fmt.Errorf("filter fingerprint: %w", err)
	}
	s.consumers.put(it.Data, cachedConsumer{c: c, filterFP: ffp[:32]})
	return c, ffp[:32], true, nil
}

// position verifies a cursor against the scope and returns its position (0 for a null cursor).
func (s *Service) position(fs feedScope, cursor *string) (uint64, error) {
	if cursor == nil || *cursor == "" {
		return 0, nil
	}
	b, err := s.cursors.decode(*cursor)
	if err != nil {
		return 0, err
	}
	if err := b.checkScope(fs.binding); err != nil {
		return 0, err
	}
	return b.Pos, nil
}

func (s *Service) cursorAt(fs feedScope, pos uint64) string {
	b := fs.binding
	b.Pos = pos
	return s.cursors.encode(b)
}

// partitions are the feed partitions a consumer's view reads: the space feed for space_log; for inbox,
// its actor's inbox plus the feed of every collection it may read (RFC §4, §8: its memory.read grants and
// the collections it is the source of).
func (s *Service) partitions(ctx context.Context, fs feedScope) ([]string, error) {
	p := fs.p
	if fs.consumer.View == ViewSpaceLog {
		return []string{pkFeed(p.SpaceID)}, nil
	}
	out := []string{pkInbox(p.SpaceID, p.ActorID)}
	if !p.HasScope(ScopeMemoryRead) {
		return out, nil
	}
	add := func(coll string) {
		if pk := pkCollectionFeed(p.SpaceID, coll); !slices.Contains(out, pk) {
			out = append(out, pk)
		}
	}
	for _, g := range p.Grants {
		if g.Permission == PermMemoryRead {
			add(g.CollectionID)
		}
	}
	colls, err := s.sourceCollections(ctx, p.SpaceID, p.ActorID)
	for _, c := range colls {
		add(c)
	}
	return out, err
}

// sourceCollections lists the collections an actor is the source of.
func (s *Service) sourceCollections(ctx context.Context, space, actor string) ([]string, error) {
	var out []string
	for items, err := range s.pages(ctx, port.Query{PK: pkSourceCollections(space, actor), Limit: 200}) {
		if err != nil {
			return nil, fmt.Errorf("listing source collections: %w", err)
		}
		for _, it := range items {
			out = append(out, it.SK)
		}
	}
	return out, nil
}

// visible reports whether an item is in the intersection of space, rights, view and filter (RFC §8.1).
func (fs feedScope) visible(fi FeedItem, applyFilter bool) bool {
	p := fs.p
	switch fi.ItemType {
	case ItemMessage:
		if fs.consumer.View == ViewInbox && !slices.Contains(fi.RecipientIDs, p.ActorID) {
			return false
		}
	case ItemReceipt:
		// A receipt is visible to the producer of the acked item (its recipient) and to observers.
		if fs.consumer.View == ViewInbox && !slices.Contains(fi.RecipientIDs, p.ActorID) {
			return false
		}
	case ItemMemoryRevision:
		var d MemoryRevisionItemData
		if err := jsonUnmarshal(fi.Data, &d); err != nil || !p.HasScope(ScopeMemoryRead) ||
			!(p.HasGrant(PermMemoryRead, d.CollectionID) || d.SourceActorID == p.ActorID) {
			return false
		}
		if applyFilter && len(fs.consumer.Filter.CollectionIDs) > 0 && !slices.Contains(fs.consumer.Filter.CollectionIDs, d.CollectionID) {
			return false
		}
	default:
		return false
	}
	if !applyFilter {
		return true
	}
	f := fs.consumer.Filter
	if len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, fi.ProducerID) {
		return false
	}
	if len(f.ItemTypes) > 0 && !slices.Contains(f.ItemTypes, string(fi.ItemType)) {
		return false
	}
	if len(f.ThreadIDs) > 0 && fi.ItemType != ItemMemoryRevision && (fi.ThreadID == nil || !slices.Contains(f.ThreadIDs, *fi.ThreadID)) {
		return false
	}
	return true
}

// feedRead resolves what inbox.read and feed.wait share: the page limit (default and maximum), the
// consumer's read scope, and the cursor's position within it.
func (s *Service) feedRead(ctx context.Context, p *Principal, consumerID string, cursor *string, limit int) (feedScope, uint64, int, error) {
	if limit == 0 {
		limit = s.limits.InboxPageDefault
	}
	if err := checkPageLimit(limit, s.limits.InboxPageMax); err != nil {
		return feedScope{}, 0, 0, err
	}
	fs, err := s.consumerScope(ctx, p, consumerID, ScopeMessageRead)
	if err != nil {
		return feedScope{}, 0, 0, err
	}
	pos, err := s.position(fs, cursor)
	return fs, pos, limit, err
}

// scanBudget bounds how many stored entries one read inspects, so a narrow filter cannot make one request
// unbounded; the cursor then moves past the entries determined invisible and has_more is true.
const scanBudgetFactor = 20

// ReadInbox returns the next page of a consumer's feed after the cursor (inbox.read). Items are returned in
// visible_seq order; the read is bounded by the sequence head read first, so a cursor never passes an item
// that could still become visible with a lower number (RFC §8.2, §16.2).
func (s *Service) ReadInbox(ctx context.Context, p *Principal, req ReadRequest) (Page, error) {
	fs, pos, limit, err := s.feedRead(ctx, p, req.ConsumerID, req.Cursor, req.Limit)
	if err != nil {
		return Page{}, err
	}
	key := readAheadKey{space: fs.p.SpaceID, consumer: fs.consumer.ConsumerID, pos: pos}
	s.ahead.join(ctx, key)
	page, next, err := s.readFrom(ctx, fs, pos, limit)
	if err != nil {
		return Page{}, err
	}
	if page.HasMore {
		key.pos = next
		s.ahead.start(key, func(ctx context.Context) error { return s.readAheadFrom(ctx, fs, next, limit) })
	}
	cp, err := s.checkpoint(ctx, fs)
	if err != nil {
		return Page{}, err
	}
	page.CheckpointCursor = cp
	return page, nil
}

// readAheadFrom reads the page of the consumer's feed after pos, which fills the feed cache (readahead.go),
// and the receipts an ack of that page reads first (prepareAck), for a store that keeps what it read,
// absent keys included.
func (s *Service) readAheadFrom(ctx context.Context, fs feedScope, pos uint64, limit int) error {
	page, _, err := s.readFrom(ctx, fs, pos, limit)
	if err != nil || len(page.Items) == 0 {
		return err
	}
	keys := make([]port.Key, len(page.Items))
	for i, it := range page.Items {
		keys[i] = keyReceipt(fs.p.SpaceID, fs.consumer.ConsumerID, it.ItemID)
	}
	_, _, err = s.store.GetMany(ctx, keys)
	return err
}

// readFrom reads the page of the consumer's feed after pos, and returns it with the position its next cursor
// holds.
func (s *Service) readFrom(ctx context.Context, fs feedScope, pos uint64, limit int) (Page, uint64, error) {
	head, err := s.head(ctx, fs.p.SpaceID)
	if err != nil {
		return Page{}, 0, err
	}
	page := Page{Items: []FeedItem{}}
	if pos >= head {
		page.NextCursor = s.cursorAt(fs, pos)
		return page, pos, nil
	}
	pks, err := s.partitions(ctx, fs)
	if err != nil {
		return Page{}, 0, err
	}
	m := newMerger(s, fs.p.SpaceID, pks, pos, head, min(limit+1, 200))
	budget := limit * scanBudgetFactor
	scanned := pos
	for ; budget > 0; budget-- {
		e, ok, err := m.next(ctx)
		if err != nil {
			return Page{}, 0, fmt.Errorf("reading feed: %w", err)
		}
		if !ok {
			page.NextCursor = s.cursorAt(fs, head) // everything up to the head was returned or is invisible
			return page, head, nil
		}
		fi, err := m.decode(e)
		if err != nil {
			return Page{}, 0, err
		}
		if fs.visible(fi, true) {
			if len(page.Items) == limit {
				page.HasMore = true
				page.NextCursor = s.cursorAt(fs, scanned)
				return page, scanned, nil
			}
			page.Items = append(page.Items, fi)
		}
		scanned = e.seq
	}
	page.HasMore = true
	page.NextCursor = s.cursorAt(fs, scanned)
	return page, scanned, nil
}

// merger yields the items of several feed partitions of a space in one ascending sequence, within
// (pos, head], each with its feed item: decoded already when the feed cache holds it, else as stored, with
// the data of its feed slot (resolve).
type merger struct {
	s       *Service
	space   string
	streams []*feedStream
	head    string
	chunk   int
}

type feedStream struct {
	pk    string
	after string
	buf   []feedEntry
	done  bool
}

// feedEntry is one entry of a feed partition: its seq, and its feed item decoded (cached) or as stored.
type feedEntry struct {
	seq    uint64
	item   port.Item
	fi     FeedItem // shared with the feed cache: not to be modified
	cached bool
}

func newMerger(s *Service, space string, pks []string, pos, head uint64, chunk int) *merger {
	m := &merger{s: s, space: space, head: seqSK(head), chunk: chunk}
	for _, pk := range pks {
		m.streams = append(m.streams, &feedStream{pk: pk, after: seqSK(pos)})
	}
	return m
}

func (m *merger) next(ctx context.Context) (feedEntry, bool, error) {
	var best *feedStream
	for _, st := range m.streams {
		if len(st.buf) == 0 && !st.done {
			items, err := m.s.store.Query(ctx, port.Query{PK: st.pk, After: st.after, UpTo: m.head, Limit: m.chunk})
			if err != nil {
				return feedEntry{}, false, err
			}
			entries, err := m.resolve(ctx, items)
			if err != nil {
				return feedEntry{}, false, err
			}
			st.buf, st.done = entries, len(items) < m.chunk
			if len(items) > 0 {
				st.after = items[len(items)-1].SK
			}
		}
		if len(st.buf) > 0 && (best == nil || st.buf[0].seq < best.buf[0].seq) {
			best = st
		}
	}
	if best == nil {
		return feedEntry{}, false, nil
	}
	e := best.buf[0]
	best.buf = best.buf[1:]
	return e, true, nil
}

// decode returns e's feed item: the cached one, or the stored one decoded, which the feed cache then keeps.
func (m *merger) decode(e feedEntry) (FeedItem, error) {
	if e.cached {
		return e.fi, nil
	}
	fi, err := decodeItem[FeedItem](e.item)
	if err != nil {
		return FeedItem{}, err
	}
	m.s.feed.put(fi)
	return fi, nil
}

// resolve turns the items read from a partition into entries. An inbox entry that holds no copy
// (inboxEntryPut) takes its feed item from the feed cache, or else its data from the space feed's slot,
// read with one GetMany for all of them. A feed or collection-feed item always has data, so it is left as
// it is, and so is an inbox entry holding a copy.
func (m *merger) resolve(ctx context.Context, items []port.Item) ([]feedEntry, error) {
	entries := make([]feedEntry, len(items))
	var rest []port.Item // the items the feed cache did not answer
	var restAt []int     // the position in items of each
	for i, it := range items {
		seq, err := parseSeqSK(it.SK)
		if err != nil {
			return nil, fmt.Errorf("feed entry %s: %w", it.Key, err)
		}
		entries[i] = feedEntry{seq: seq, item: it}
		if len(it.Data) == 0 && len(it.Attrs) == 0 {
			if fi, ok := m.s.feed.get(m.space, strconv.FormatUint(seq, 10)); ok {
				entries[i].fi, entries[i].cached = fi, true
				continue
			}
		}
		rest, restAt = append(rest, it), append(restAt, i)
	}
	refs, slots, found, err := m.s.feedSlotsOf(ctx, m.space, rest)
	if err != nil {
		return nil, err
	}
	for n, r := range refs {
		at := restAt[r.at]
		if !found[n] {
			return nil, fmt.Errorf("inbox entry %s: no feed slot %s", items[at].Key, r.slot)
		}
		entries[at].item.Data = slots[n].Data
	}
	return entries, nil
}

// slotRef is an inbox entry that holds no copy of its feed item: its place among the items read, its seq
// and the key of the feed slot that holds the item.
type slotRef struct {
	at   int
	seq  uint64
	slot port.Key
}

// feedSlotsOf reads, with one GetMany or one range query (denseRun), the feed slots of the entries among
// items of space's inboxes that hold no copy (an item with neither data nor attributes), and returns those
// entries with what was read.
func (s *Service) feedSlotsOf(ctx context.Context, space string, items []port.Item) ([]slotRef, []port.Item, []bool, error) {
	var refs []slotRef
	var keys []port.Key
	for i, it := range items {
		if len(it.Data) > 0 || len(it.Attrs) > 0 {
			continue
		}
		seq, err := parseSeqSK(it.SK)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("inbox entry %s: %w", it.Key, err)
		}
		refs = append(refs, slotRef{at: i, seq: seq, slot: keyFeed(space, seq)})
		keys = append(keys, refs[len(refs)-1].slot)
	}
	if len(keys) == 0 {
		return nil, nil, nil, nil
	}
	var slots []port.Item
	var found []bool
	var err error
	if denseRun(refs) {
		slots, found, err = s.feedSlotRange(ctx, space, refs)
	} else {
		slots, found, err = s.store.GetMany(ctx, keys)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading the feed slots of inbox entries: %w", err)
	}
	return refs, slots, found, nil
}

// denseRunMin and denseRunSpan bound the runs of feed slots read with one range query (denseRun).
const (
	denseRunMin  = 8
	denseRunSpan = 2 // at most this many slots in the range per slot wanted
)

// denseRun reports whether the slots of refs, in ascending seq order, fill at least half of the range they
// span, with at least denseRunMin of them: an inbox whose actor receives most of the space's items, the
// usual case. One range query reads such a run with half the CPU of point reads, or less, in the embedded
// store (BenchmarkFeedSlots in store/pebble).
func denseRun(refs []slotRef) bool {
	if len(refs) < denseRunMin {
		return false
	}
	for i := 1; i < len(refs); i++ {
		if refs[i].seq <= refs[i-1].seq {
			return false
		}
	}
	first, last := refs[0].seq, refs[len(refs)-1].seq
	return first > 0 && last-first < uint64(denseRunSpan*len(refs))
}

// feedSlotRange reads the feed slots of refs, a dense run (denseRun), with one range query of the feed
// partition: slots[i] is the slot of refs[i], found[i] whether it exists.
func (s *Service) feedSlotRange(ctx context.Context, space string, refs []slotRef) ([]port.Item, []bool, error) {
	first, last := refs[0].seq, refs[len(refs)-1].seq
	items, err := s.store.Query(ctx, port.Query{PK: pkFeed(space), After: seqSK(first - 1), UpTo: seqSK(last), Limit: int(last - first + 1)})
	if err != nil {
		return nil, nil, err
	}
	slots, found := make([]port.Item, len(refs)), make([]bool, len(refs))
	j := 0
	for n, r := range refs {
		sk := r.slot.SK
		for j < len(items) && items[j].SK < sk {
			j++
		}
		if j < len(items) && items[j].SK == sk {
			slots[n], found[n] = items[j], true
		}
	}
	return slots, found, nil
}

// checkpoint returns the stored checkpoint cursor of the consumer's current view and rights.
func (s *Service) checkpoint(ctx context.Context, fs feedScope) (*string, error) {
	it, found, err := s.store.Get(ctx, keyCheckpoint(fs.p.SpaceID, fs.consumer.ConsumerID, fs.consumer.ViewRevision, fs.binding.GrantFP))
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, nil
	}
	pos, err := strconv.ParseUint(it.Attr(attrPos), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("checkpoint position: %w", err)
	}
	c := s.cursorAt(fs, pos)
	return &c, nil
}
