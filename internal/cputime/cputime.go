// Package cputime reads the CPU time this process has used, for benchmarks that report CPU time per
// operation (user+system, all goroutines: a figure that stays meaningful when other processes compete for
// the cores, where operations per second does not).
package cputime
