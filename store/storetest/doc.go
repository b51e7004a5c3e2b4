// Package storetest is the contract suite of the storage ports (SUPPLEMENT §14.2). Every adapter runs the
// same tests through the public port operations only:
//
//	func TestContract(t *testing.T) {
//		storetest.RunItemStore(t, func(t *testing.T) port.ItemStore { return mem.New() })
//	}
//
// newStore is called once per subtest and must return an empty store; the adapter's test registers any
// cleanup with t.Cleanup. The suites assume nothing about an adapter beyond the port: limits are taken from
// MaxOps, and checks of invalid input only require an error that is not a condition failure and leaves no
// trace.
package storetest
