package domain

import (
	"context"
	"fmt"

	"github.com/waypost/waypost/domain/port"
)

// The control plane's lists: what the owner's console and the OAuth consent page show. Each reads one
// partition range; they are bounded by listMax entries.

// listMax bounds every control-plane list.
const listMax = 1000

// SpaceList is the result of ListSpaces.
type SpaceList struct {
	Spaces []SpaceResult `json:"spaces"`
}

// ActorList is the result of ListActors.
type ActorList struct {
	Actors []ActorResult `json:"actors"`
}

// ConsumerList is the result of ListConsumers.
type ConsumerList struct {
	Consumers []ConsumerResult `json:"consumers"`
}

// TokenList is the result of ListTokens (never a secret).
type TokenList struct {
	Tokens []TokenResult `json:"tokens"`
}

// ListSpaces lists the deployment's spaces that are not deleted, oldest ID first.
func (s *Service) ListSpaces(ctx context.Context) (SpaceList, error) {
	spaces, err := listIndexed(ctx, s, pkSpaces, keySpace, func(sp Space) bool { return sp.State != SpaceDeleted })
	if err != nil {
		return SpaceList{}, fmt.Errorf("listing spaces: %w", err)
	}
	out := SpaceList{Spaces: make([]SpaceResult, len(spaces))}
	for i, sp := range spaces {
		out.Spaces[i] = s.spaceResult(sp)
	}
	return out, nil
}

// listIndexed reads the records an index partition names (each entry's sort key is a record's ID, key its
// record's key), in index order, those keep accepts, at most listMax.
func listIndexed[T any](ctx context.Context, s *Service, index string, key func(id string) port.Key, keep func(T) bool) ([]T, error) {
	out := []T{}
	for items, err := range s.pages(ctx, port.Query{PK: index, Limit: 200}) {
		if err != nil {
			return nil, err
		}
		keys := make([]port.Key, len(items))
		for i, it := range items {
			keys[i] = key(it.Key.SK)
		}
		recs, found, err := getRecords[T](ctx, s.store, keys)
		if err != nil {
			return nil, err
		}
		for i, r := range recs {
			if found[i] && keep(r) {
				out = append(out, r)
			}
		}
		if len(out) >= listMax {
			break
		}
	}
	return out, nil
}

// prefixQuery reads the items of partition pk whose sort keys start with prefix (IDs are ASCII, so every
// such key sorts below prefix + 0xff), 200 a page.
func prefixQuery(pk, prefix string) port.Query {
	return port.Query{PK: pk, After: prefix, UpTo: prefix + "\xff", Limit: 200}
}

// listInSpace decodes the records of one kind (sort-key prefix) of a live space.
func listInSpace[T any](ctx context.Context, s *Service, spaceID, prefix string, each func(T)) error {
	if _, err := s.liveSpace(ctx, spaceID); err != nil {
		return err
	}
	n := 0
	for items, err := range s.pages(ctx, prefixQuery(keySpace(spaceID).PK, prefix)) {
		if err != nil {
			return fmt.Errorf("listing %s: %w", prefix, err)
		}
		for _, it := range items {
			v, err := decodeItem[T](it)
			if err != nil {
				return err
			}
			each(v)
			n++
		}
		if n >= listMax {
			break
		}
	}
	return nil
}

// ListActors lists the actors of a space, revoked ones included (marked).
func (s *Service) ListActors(ctx context.Context, spaceID string) (ActorList, error) {
	out := ActorList{Actors: []ActorResult{}}
	err := listInSpace(ctx, s, spaceID, "ACT#", func(a Actor) {
		out.Actors = append(out.Actors, ActorResult{ActorID: a.ActorID, DisplayName: a.DisplayName, Revoked: a.Revoked})
	})
	return out, err
}

// ListConsumers lists the consumers of a space.
func (s *Service) ListConsumers(ctx context.Context, spaceID string) (ConsumerList, error) {
	out := ConsumerList{Consumers: []ConsumerResult{}}
	err := listInSpace(ctx, s, spaceID, "CON#", func(c Consumer) { out.Consumers = append(out.Consumers, consumerResult(c)) })
	return out, err
}

// ListTokens lists the tokens of a space without their secrets, revoked ones included (marked); a token
// issued through OAuth names its client.
func (s *Service) ListTokens(ctx context.Context, spaceID string) (TokenList, error) {
	out := TokenList{Tokens: []TokenResult{}}
	err := listInSpace(ctx, s, spaceID, "TOK#", func(t Token) { out.Tokens = append(out.Tokens, tokenResult(t, "")) })
	return out, err
}
