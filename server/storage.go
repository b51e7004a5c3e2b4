package server

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waypost/waypost/domain"
	"github.com/waypost/waypost/store/pebble"
)

// storageStatus is the item store's room as admin stats publishes it.
func storageStatus(r pebble.Room) domain.StorageStatus {
	st := domain.StorageStatus{Dir: r.Dir, FreeBytes: r.AvailBytes, TotalBytes: r.TotalBytes, NeededBytes: r.NeedBytes,
		WritesRefused: r.WritesRefused}
	if r.WritesRefused && !r.RefusedSince.IsZero() {
		since := r.RefusedSince.UTC()
		st.RefusedSince = &since
	}
	return st
}

// Room reports the data volume's free room and whether the item store refuses writes.
func (s *Server) Room() pebble.Room { return s.store.Room() }

// registerStorageGauges registers the gauges of the data volume: its free bytes, the free bytes the item
// store needs to take writes again once refused, and whether writes are refused (1) or taken (0).
func registerStorageGauges(reg *prometheus.Registry, st *pebble.Store) error {
	gauges := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "waypost", Subsystem: "store", Name: "volume_free_bytes",
			Help: "Free bytes on the volume of the data directory (-1 when unknown)."},
			func() float64 { return float64(st.Room().AvailBytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "waypost", Subsystem: "store", Name: "volume_needed_bytes",
			Help: "Free bytes the item store needs on its volume to take writes again once it refuses them."},
			func() float64 { return float64(st.Room().NeedBytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "waypost", Subsystem: "store", Name: "writes_refused",
			Help: "1 while the item store refuses writes (503 STORAGE_UNAVAILABLE) for want of room, 0 otherwise."},
			func() float64 {
				if st.Room().WritesRefused {
					return 1
				}
				return 0
			}),
	}
	for _, g := range gauges {
		if err := reg.Register(g); err != nil {
			return fmt.Errorf("registering the storage gauges: %w", err)
		}
	}
	return nil
}
