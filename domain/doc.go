// Package domain is the core of Waypost: the types, rules, errors and every operation of RFC-0001 and the
// SUPPLEMENT — messages, inbox feeds and receipts, blobs, memory collections, webhook subscriptions and
// their deliveries, the control plane — as methods of [Service], over the ports of package port (item
// store, blob store, clock, IDs, notifier, feed watcher, webhook sender, delivery queue).
//
// It does no I/O of its own and imports no transport, storage engine or cloud SDK
// (TestDomainDoesNoIO): adapters implement the ports (store/…, webhook/…, channel/…), the transports
// (api/…) call the operations as api/ops describes them, and one contract suite (domain/domaintest) runs
// the same properties against every adapter.
//
// Errors are [*Error] values with a public [Code] (SUPPLEMENT §11.4); anything else an operation returns
// is STORAGE_UNAVAILABLE or INTERNAL to a client ([AsError]). Every write that takes a request_id is
// idempotent: its submission is recorded under its operation name (status reports it, RFC §11.2).
package domain
