package dynamo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/waypost/waypost/domain/port"
	"github.com/waypost/waypost/store/kv"
)

// Attributes of the sequence items (see the package documentation, "Sequences"). They are not condition
// attributes (no a_ prefix), so a port read never shows them.
const (
	// AttrReserved is the number attribute of a sequence's counter item: the last value reserved.
	AttrReserved = "seq"
	// AttrHead is the number attribute of a sequence's head item: the watermark (visible head).
	AttrHead = "head"
	// AttrVoid marks a void slot (boolean true): a slot whose transaction will never commit.
	AttrVoid = "void"
	// legacyCounter is the counter attribute of the optimistic in-transaction allocation (port.CounterAttr
	// as a condition attribute), which sequences used before reservations; it is migrated on first use.
	legacyCounter = AttrPrefix + port.CounterAttr
)

// DefaultVoidGrace is how long a slot may stay unresolved below a filled slot before a reader voids it.
const DefaultVoidGrace = 10 * time.Second

// Bounds of the sequence machinery.
const (
	// slotScanLimit is how many slots one probe of the slot partition above the watermark reads.
	slotScanLimit = 100
	// releaseTimeout bounds the calls that release a reservation after its transaction failed (they run
	// even when the caller's context has ended).
	releaseTimeout = 5 * time.Second
	// maxGapRecords bounds the gap observations one Store keeps; past it they are dropped (which only
	// delays voiding).
	maxGapRecords = 1 << 14
	// gapRecordSpan bounds how many missing slots one observation records.
	gapRecordSpan = 1024
	// headProbeInterval is how long Head trusts the watermark without probing above it after this Store
	// saw it move or probed it (see Head).
	headProbeInterval = time.Second
)

// errSlotTaken reports that a transaction failed only because a slot it fills was already present: voided
// by a reader after the grace period (or filled by a writer of the optimistic scheme during a migration).
var errSlotTaken = errors.New("reserved slot voided before the commit")

// commitSeq commits a transaction with a sequence: reserve, build, send with every slot guarded, then
// advance the watermark; a slot voided meanwhile means a new reservation and a new Build.
func (s *Store) commitSeq(ctx context.Context, tx port.Tx) (uint64, error) {
	seq := *tx.Seq
	if err := validSeq(seq); err != nil {
		return 0, fmt.Errorf("dynamo: commit: sequence: %w: %w", kv.ErrInvalidTx, err)
	}
	use, err := s.usageOf(tx)
	if err != nil {
		return 0, err
	}
	if tx.Count == 0 {
		return 0, s.commitUsage(ctx, tx, use)
	}
	for round := 0; ; round++ {
		first, err := s.reserve(ctx, seq, tx.Count, tx.Max, use)
		if err != nil {
			return 0, err
		}
		last := first + tx.Count - 1
		p, err := s.prepare(ctx, tx, first)
		if err == nil {
			err = s.send(ctx, p)
		}
		if err == nil {
			s.advance(ctx, seq, first, last)
			return first, nil
		}
		if s.release(ctx, seq, first, last, p) {
			// The transaction did commit (its response was lost): its slot is filled.
			s.advance(ctx, seq, first, last)
			return first, nil
		}
		s.giveBack(ctx, seq, use)
		if !errors.Is(err, errSlotTaken) {
			return 0, err
		}
		if round >= s.opts.CounterRetries {
			return 0, fmt.Errorf("dynamo: commit: slots of sequence %s voided before the commit %d times in a row: %w",
				seq.Slots, round+1, port.ErrUnavailable)
		}
	}
}

// validSeq checks every key of seq the store reads or writes (validKey): its counter, its head and the keys
// of its slots.
func validSeq(seq port.Sequence) error {
	for _, k := range []port.Key{seq.Counter, seq.Head, seq.Slot(0)} {
		if err := validKey(k); err != nil {
			return err
		}
	}
	return nil
}

// reserve takes count values of seq with one atomic update of its counter item and returns the first; the
// same update adds the transaction's usage (use, nil for none), under its limits.
func (s *Store) reserve(ctx context.Context, seq port.Sequence, count, max uint64, use *usage) (uint64, error) {
	rule := port.Tx{Count: count, Max: max} // kv's counter rule (kv.Allocate), here on the reservation
	if _, _, err := kv.Allocate(seq.Counter, 0, rule); err != nil {
		return 0, fmt.Errorf("dynamo: commit: %w", err)
	}
	in := &dynamodb.UpdateItemInput{
		TableName:        aws.String(s.table),
		Key:              keyAV(seq.Counter),
		UpdateExpression: aws.String("ADD #r :c"),
		// A fresh counter, or one below the limit; a counter of the optimistic scheme (a_n without seq) fails
		// and is migrated first.
		ConditionExpression:                 aws.String("(attribute_not_exists(#r) AND attribute_not_exists(#l)) OR #r <= :lim"),
		ExpressionAttributeNames:            map[string]string{"#r": AttrReserved, "#l": legacyCounter},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":c": number(count), ":lim": number(max - count)},
		ReturnValues:                        types.ReturnValueUpdatedNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              types.ReturnConsumedCapacityTotal,
	}
	if use != nil {
		if err := use.within(); err != nil {
			return 0, err
		}
		use.addTo(in)
	}
	for attempt := 0; ; attempt++ {
		out, err := s.update(ctx, in)
		if err == nil {
			n, err := numberAttr(out.Attributes, AttrReserved)
			if err != nil || n < count {
				return 0, fmt.Errorf("dynamo: commit: reserving on %s: %w: %v", seq.Counter, kv.ErrCorrupt, err)
			}
			return n - count + 1, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return 0, fmt.Errorf("dynamo: commit: reserving on %s: %w", seq.Counter, err)
		}
		old, err := s.failedItem(ctx, ccf, seq.Counter)
		if err != nil {
			return 0, fmt.Errorf("dynamo: commit: reserving on %s: %w", seq.Counter, err)
		}
		if use != nil && use.exceededBy(old) {
			return 0, fmt.Errorf("dynamo: commit: %s: %w", seq.Counter, port.ErrQuotaExceeded)
		}
		if _, has := old[AttrReserved]; has {
			n, _ := numberAttr(old, AttrReserved)
			if _, _, err := kv.Allocate(seq.Counter, n, rule); err != nil {
				return 0, fmt.Errorf("dynamo: commit: %w", err)
			}
		}
		if attempt >= 3 {
			return 0, fmt.Errorf("dynamo: commit: reserving on %s: counter changing under the migration: %w", seq.Counter, port.ErrUnavailable)
		}
		if _, has := old[AttrReserved]; !has && old[legacyCounter] != nil {
			if err := s.migrate(ctx, seq, old); err != nil {
				return 0, err
			}
		}
	}
}

// migrate moves a counter of the optimistic scheme (a_n, every value up to it committed) to reservations:
// first the watermark is raised to a_n, then the reservation counter starts from it.
func (s *Store) migrate(ctx context.Context, seq port.Sequence, old map[string]types.AttributeValue) error {
	raw, ok := old[legacyCounter].(*types.AttributeValueMemberS)
	if !ok {
		return fmt.Errorf("dynamo: commit: counter %s: %w: %s is not a string", seq.Counter, kv.ErrCorrupt, legacyCounter)
	}
	n, err := strconv.ParseUint(raw.Value, 10, 64)
	if err != nil {
		return fmt.Errorf("dynamo: commit: counter %s: %w: %s holds %q", seq.Counter, kv.ErrCorrupt, legacyCounter, raw.Value)
	}
	if _, _, err := s.setHead(ctx, seq, 0, n); err != nil {
		return fmt.Errorf("dynamo: commit: migrating %s: %w", seq.Counter, err)
	}
	_, err = s.update(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       keyAV(seq.Counter),
		UpdateExpression:          aws.String("SET #r = :n"),
		ConditionExpression:       aws.String("attribute_not_exists(#r) AND #l = :raw"),
		ExpressionAttributeNames:  map[string]string{"#r": AttrReserved, "#l": legacyCounter},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": number(n), ":raw": &types.AttributeValueMemberS{Value: raw.Value}},
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) { // a concurrent migration (or a legacy commit) is fine: retry
		return fmt.Errorf("dynamo: commit: migrating %s: %w", seq.Counter, err)
	}
	return nil
}

// release resolves the slots of a reservation whose transaction failed: each is voided (a conditional put,
// so a transaction still in flight can never fill it). When a slot turns out to be filled with what p
// (the request sent, nil when none was) put there, the transaction did commit after all (its response was
// lost), and release reports true. The watermark is advanced over the slots once all are resolved. It runs
// on its own deadline, even when ctx has ended.
func (s *Store) release(ctx context.Context, seq port.Sequence, first, last uint64, p *prepared) (committed bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	resolved := true
	for v := first; v <= last; v++ {
		present, err := s.voidSlot(ctx, seq.Slot(v))
		if err != nil {
			resolved = false // readers void it after the grace period
			continue
		}
		if present && p != nil && p.input != nil {
			k := seq.Slot(v)
			it, found, err := s.rawGet(ctx, k)
			d, _ := it[AttrData].(*types.AttributeValueMemberB)
			if err == nil && found && !isVoid(it) && d != nil && bytes.Equal(d.Value, p.slotItems[k.SK]) {
				return true // filled by this transaction: all its slots are written together
			}
		}
	}
	if resolved {
		s.advance(ctx, seq, first, last)
	}
	return false
}

// advance moves the watermark from first-1 to last over slots the caller resolved, then carries it over
// what others resolved above (probe). The rule that keeps the watermark moving without anyone waiting:
// whoever moves the watermark probes above it and carries on. When the watermark is below first-1, a
// lower slot has not finished: whoever later moves the watermark to first-1 (or past it) probes and finds
// these slots, since they were filled before this writer tried. When the move fails because another
// writer or reader moved the watermark first, that one probes. A writer whose move fails because the
// watermark is below its slots probes from the watermark too, so a watermark left behind by a writer whose
// own move failed (a timeout) is carried by the next one; the probe stops at once when the slot above the
// watermark is still being committed. What is left (a writer that died) is resolved by readers (Head).
func (s *Store) advance(ctx context.Context, seq port.Sequence, first, last uint64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	now := s.opts.Now()
	cur, ok, err := s.setHead(ctx, seq, first-1, last)
	switch {
	case err != nil:
		return
	case ok:
		if h, err := s.resolve(ctx, seq, last); err == nil {
			s.gaps.probed(seq.Slots, h, now)
		}
	case cur < first-1:
		// A lower slot is unresolved, or resolved without anyone carrying the watermark over it (its
		// writer's move failed or timed out): a short probe from the watermark carries it in the second
		// case, and stops at once in the first.
		if h, err := s.resolve(ctx, seq, cur); err == nil {
			s.gaps.probed(seq.Slots, h, now)
		}
	}
}

// Head returns the visible head of seq: the watermark, carried over every slot filled or voided above it.
// A slot missing below a present one is observed; once it has stayed missing for the grace period since
// this Store first saw it missing, it is voided (so the head can pass it, and a late transaction fails on
// it). See the package documentation.
//
// Writers carry the watermark over every slot committed above it unless one of them fails between its
// commit and its move (a crash, a timeout) or died after reserving. So the probe above the watermark, which
// finds those, is skipped while this Store saw the watermark move, or probed it itself, less than
// headProbeInterval ago, unless it is timing a gap of the sequence: a read then costs one GetItem, and
// what such a failure hides becomes visible at most headProbeInterval later.
func (s *Store) Head(ctx context.Context, seq port.Sequence) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("dynamo: head: %w", err)
	}
	if err := validSeq(seq); err != nil {
		return 0, fmt.Errorf("dynamo: head: %w", err)
	}
	h, err := s.readHead(ctx, seq)
	if err != nil {
		return 0, err
	}
	now := s.opts.Now()
	if s.gaps.fresh(seq.Slots, h, now) {
		return h, nil
	}
	h, err = s.resolve(ctx, seq, h)
	if err == nil {
		s.gaps.probed(seq.Slots, h, now)
	}
	return h, err
}

// readHead reads the watermark (consistently). Without a head item, the sequence has either never
// committed in this scheme (0) or was allocated by the optimistic scheme, whose counter is its head.
func (s *Store) readHead(ctx context.Context, seq port.Sequence) (uint64, error) {
	it, found, err := s.rawGet(ctx, seq.Head)
	if err != nil {
		return 0, fmt.Errorf("dynamo: head: reading %s: %w", seq.Head, err)
	}
	if found {
		h, err := numberAttr(it, AttrHead)
		if err != nil {
			return 0, fmt.Errorf("dynamo: head: %s: %w", seq.Head, err)
		}
		return h, nil
	}
	ctr, found, err := s.rawGet(ctx, seq.Counter)
	if err != nil {
		return 0, fmt.Errorf("dynamo: head: reading %s: %w", seq.Counter, err)
	}
	if raw, ok := ctr[legacyCounter].(*types.AttributeValueMemberS); found && ok {
		n, err := strconv.ParseUint(raw.Value, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("dynamo: head: %s: %w: %s holds %q", seq.Counter, kv.ErrCorrupt, legacyCounter, raw.Value)
		}
		return n, nil
	}
	return 0, nil
}

// resolve carries the watermark from h over the slots present (filled or void) above it, voiding a missing
// slot that has blocked a present one for the grace period, and returns the head reached. Only reads fail
// it: when the watermark or a void cannot be written (a reader without write access, throttling), it
// returns the head it could establish, and a later call writes.
//
// The slots are read in pages that start small (2) and double while every slot a page returned was
// contiguous, up to slotScanLimit: a probe that finds nothing to carry, or a gap right above the watermark,
// reads little, and each slot carried is read about twice at most.
func (s *Store) resolve(ctx context.Context, seq port.Sequence, h uint64) (uint64, error) {
	limit := 2
	for {
		present, err := s.scanSlots(ctx, seq, h, limit)
		if err != nil {
			return h, fmt.Errorf("dynamo: head: %w", err)
		}
		if len(present) == 0 {
			return h, nil
		}
		run := h
		for _, v := range present {
			if v != run+1 {
				break
			}
			run = v
		}
		if run == present[len(present)-1] && len(present) == limit {
			limit = min(2*limit, slotScanLimit) // all contiguous: more may follow
		}
		if run > h {
			cur, ok, err := s.setHead(ctx, seq, h, run)
			if err != nil {
				// Every slot up to run is resolved, whether or not the watermark could be written (a reader
				// without write access, throttling): the next reader carries it.
				return run, nil
			}
			if !ok {
				// Another writer or reader moved the watermark to cur first; whoever moves it probes above
				// it, so this one stops here.
				return max(h, cur), nil
			}
			h = run
			s.gaps.forget(seq.Slots, h)
			continue
		}
		// Slots h+1 … present[0]-1 are missing while present[0] is resolved: a writer is committing them, or
		// died after reserving them. Every slot seen missing below a present one is observed now.
		now := s.opts.Now()
		since := s.gaps.observe(seq.Slots, h, present, now)
		if now.Sub(since) < s.opts.VoidGrace {
			return h, nil
		}
		if _, err := s.voidSlot(ctx, seq.Slot(h+1)); err != nil {
			return h, nil // unresolved for now: another reader (or this one, later) voids it
		}
	}
}

// setHead raises the watermark to `to` if it is in [from, to) (absent counts as 0). It returns the watermark
// it found when it did not (a lower slot still unresolved, or another writer already past `to`).
func (s *Store) setHead(ctx context.Context, seq port.Sequence, from, to uint64) (cur uint64, ok bool, err error) {
	cond := "#h BETWEEN :from AND :below"
	values := map[string]types.AttributeValue{":to": number(to), ":from": number(from), ":below": number(to - 1)}
	if from == 0 {
		cond = "attribute_not_exists(#h) OR #h < :to"
		values = map[string]types.AttributeValue{":to": number(to)}
	}
	_, err = s.update(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 keyAV(seq.Head),
		UpdateExpression:                    aws.String("SET #h = :to"),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            map[string]string{"#h": AttrHead},
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              types.ReturnConsumedCapacityTotal,
	})
	if err == nil {
		return to, true, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return 0, false, fmt.Errorf("raising %s to %d: %w", seq.Head, to, err)
	}
	old, err := s.failedItem(ctx, ccf, seq.Head)
	if err != nil {
		return 0, false, fmt.Errorf("raising %s to %d: %w", seq.Head, to, err)
	}
	cur, err = numberAttr(old, AttrHead)
	if err != nil && len(old) > 0 {
		return 0, false, fmt.Errorf("raising %s to %d: %w", seq.Head, to, err)
	}
	return cur, false, nil
}

// scanSlots returns the values of the slots present (filled or void) above h, ascending, at most limit.
func (s *Store) scanSlots(ctx context.Context, seq port.Sequence, h uint64, limit int) ([]uint64, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("#pk = :pk AND #sk > :after"),
		ExpressionAttributeNames:  map[string]string{"#pk": AttrPK, "#sk": AttrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: seq.Slots}, ":after": &types.AttributeValueMemberS{Value: port.SlotSK(h)}},
		ProjectionExpression:      aws.String("#sk"),
		ConsistentRead:            aws.Bool(true),
		Limit:                     aws.Int32(int32(limit)),
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	}
	page, err := call(ctx, s, in, s.api.Query)
	if err != nil {
		return nil, fmt.Errorf("probing %s above %d: %w", seq.Slots, h, err)
	}
	s.report(Usage{Operation: "Query", Items: len(page.Items)}, page.ConsumedCapacity)
	out := make([]uint64, 0, len(page.Items))
	for _, av := range page.Items {
		sk, ok := av[AttrSK].(*types.AttributeValueMemberS)
		if !ok {
			return nil, fmt.Errorf("probing %s: %w: slot without a sort key", seq.Slots, kv.ErrCorrupt)
		}
		v, err := strconv.ParseUint(sk.Value, 10, 64)
		if err != nil || port.SlotSK(v) != sk.Value {
			return nil, fmt.Errorf("probing %s: %w: slot key %q", seq.Slots, kv.ErrCorrupt, sk.Value)
		}
		out = append(out, v)
	}
	return out, nil
}

// voidSlot writes a void marker at k unless an item is there. present reports that one was (filled, or
// voided by someone else).
func (s *Store) voidSlot(ctx context.Context, k port.Key) (present bool, err error) {
	av := keyAV(k)
	av[AttrVoid] = &types.AttributeValueMemberBOOL{Value: true}
	in := &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     av,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": AttrPK},
		ReturnConsumedCapacity:   types.ReturnConsumedCapacityTotal,
	}
	out, err := call(ctx, s, in, s.api.PutItem)
	if err == nil {
		s.report(Usage{Operation: "PutItem", Items: 1, WriteUnits: WriteUnits(ItemSize(av))}, out.ConsumedCapacity)
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("voiding %s: %w", k, err)
	}
	return false, nil
}

// update sends one UpdateItem, retrying transient failures.
func (s *Store) update(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	out, err := call(ctx, s, in, s.api.UpdateItem)
	if err != nil {
		return nil, err
	}
	s.report(Usage{Operation: "UpdateItem", Items: 1, WriteUnits: 1}, out.ConsumedCapacity)
	return out, nil
}

// failedItem returns the item a conditional update failed on: the one DynamoDB returned with the failure
// (ReturnValuesOnConditionCheckFailure), or, when the emulator returns none, a consistent read of it.
func (s *Store) failedItem(ctx context.Context, ccf *types.ConditionalCheckFailedException, k port.Key) (map[string]types.AttributeValue, error) {
	if len(ccf.Item) > 0 {
		return ccf.Item, nil
	}
	it, _, err := s.rawGet(ctx, k)
	return it, err
}

// rawGet reads an item as stored (consistently), void markers and sequence attributes included.
func (s *Store) rawGet(ctx context.Context, k port.Key) (map[string]types.AttributeValue, bool, error) {
	in := &dynamodb.GetItemInput{
		TableName:              aws.String(s.table),
		Key:                    keyAV(k),
		ConsistentRead:         aws.Bool(true),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}
	out, err := call(ctx, s, in, s.api.GetItem)
	if err != nil {
		return nil, false, err
	}
	size, n := 0, 0
	if out.Item != nil {
		size, n = ItemSize(out.Item), 1
	}
	s.report(Usage{Operation: "GetItem", Items: n, ReadUnits: ReadUnits(size)}, out.ConsumedCapacity)
	return out.Item, out.Item != nil, nil
}

// isVoid reports whether a stored item is a void slot.
func isVoid(av map[string]types.AttributeValue) bool {
	b, ok := av[AttrVoid].(*types.AttributeValueMemberBOOL)
	return ok && b.Value
}

func number(n uint64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatUint(n, 10)}
}

// numberAttr reads a non-negative integer number attribute.
func numberAttr(av map[string]types.AttributeValue, name string) (uint64, error) {
	n, ok := av[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("%w: attribute %s missing or not a number", kv.ErrCorrupt, name)
	}
	v, err := strconv.ParseUint(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: attribute %s holds %q", kv.ErrCorrupt, name, n.Value)
	}
	return v, nil
}

// gapLog remembers when this Store first saw each missing slot below a present one, per slot partition.
// A slot's grace period runs from its own first observation, never from a shared "last updated" time, so a
// gap that just appeared is never voided because an older one was resolved.
type gapLog struct {
	mu   sync.Mutex
	n    int
	seen map[string]map[uint64]time.Time
	// last is, per slot partition, the watermark this Store last saw move or probed, and when.
	last map[string]probe
}

type probe struct {
	head uint64
	at   time.Time
}

// fresh reports whether Head may trust watermark h without probing: this Store saw the watermark move to
// h, or probed at h less than headProbeInterval ago, and times no gap of the partition.
func (g *gapLog) fresh(slots string, h uint64, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.seen[slots]) > 0 {
		return false
	}
	p, ok := g.last[slots]
	switch {
	case !ok || h < p.head:
		return false
	case h > p.head: // it moved since: writers are carrying it
		g.last[slots] = probe{head: h, at: now}
		return true
	}
	return now.Sub(p.at) < headProbeInterval
}

// probed records that a probe at now left the watermark of slots at h.
func (g *gapLog) probed(slots string, h uint64, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.last == nil || len(g.last) >= maxGapRecords {
		g.last = map[string]probe{}
	}
	if p, ok := g.last[slots]; !ok || h >= p.head {
		g.last[slots] = probe{head: h, at: now}
	}
}

// observe records as missing now every slot above h that the ascending list of present slots skips (those
// not recorded yet, at most gapRecordSpan per gap), and returns when slot h+1 was first observed missing.
func (g *gapLog) observe(slots string, h uint64, present []uint64, now time.Time) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil {
		g.seen = map[string]map[uint64]time.Time{}
	}
	m := g.seen[slots]
	if m == nil {
		if g.n >= maxGapRecords { // drop everything: observations restart, which only delays voiding
			g.seen, g.n = map[string]map[uint64]time.Time{}, 0
		}
		m = map[uint64]time.Time{}
		g.seen[slots] = m
	}
	prev := h
	for _, p := range present {
		for v := prev + 1; v < p && v-prev <= gapRecordSpan; v++ {
			if _, ok := m[v]; !ok {
				m[v] = now
				g.n++
			}
		}
		prev = p
	}
	return m[h+1]
}

// forget drops the observations of slots at or below h (resolved).
func (g *gapLog) forget(slots string, h uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.seen[slots]
	for v := range m {
		if v <= h {
			delete(m, v)
			g.n--
		}
	}
	if m != nil && len(m) == 0 {
		delete(g.seen, slots)
	}
}

// DropSequence removes what the store keeps of seq besides the items transactions wrote, for a space being
// deleted (its visible items are gone by then): the slots left in the slot partition — void markers, and
// any slot a transaction filled after the domain read the feed — at most limit per call, then the watermark
// item. It returns how many items it removed; 0 when nothing is left.
func (s *Store) DropSequence(ctx context.Context, seq port.Sequence, limit int) (int, error) {
	limit = min(max(limit, 1), MaxOps)
	slots, err := s.scanSlots(ctx, seq, 0, limit)
	if err != nil {
		return 0, err
	}
	keys := make([]port.Key, 0, len(slots))
	for _, v := range slots {
		keys = append(keys, seq.Slot(v))
	}
	if len(keys) == 0 {
		if _, found, err := s.rawGet(ctx, seq.Head); err != nil || !found {
			return 0, err
		}
		keys = append(keys, seq.Head)
	}
	items := make([]types.TransactWriteItem, len(keys))
	for i, k := range keys {
		items[i] = types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(s.table), Key: keyAV(k)}}
	}
	in := &dynamodb.TransactWriteItemsInput{TransactItems: items, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal}
	out, err := call(ctx, s, in, s.api.TransactWriteItems)
	if err != nil {
		return 0, fmt.Errorf("dropping sequence %s: %w", seq.Slots, err)
	}
	s.report(Usage{Operation: "TransactWriteItems", Items: len(items), WriteUnits: float64(2 * len(items))}, ptrs(out.ConsumedCapacity)...)
	return len(keys), nil
}
