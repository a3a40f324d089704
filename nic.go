// Local interfaces: one drain-rate estimate per interface, shared by the
// process's connections through it (sender.Pool).

package multirail

import (
	"net"
	"sync"
	"time"

	"github.com/multirail/multirail/internal/sender"
)

// nic is one local interface of the process, as the planner sees it: the
// drain rate of every rail that leaves through it, pooled.
type nic struct {
	mu   sync.Mutex // a leaf: taken under Conn.mu, takes nothing
	pool sender.Pool
}

// poolAfter is how old a rail's own newest rate sample must be before the
// planner takes its interface's rate instead.
const poolAfter = 40 * time.Millisecond

// poolMinBytes is the fewest bytes a rate sample must be made of to go
// into its interface's pool. Small messages (an 8-byte allreduce) take
// interval samples too, of a few hundred bytes over the 20 ms window, far
// below the rail's rate: a pool that took them (4-host lab, 8 bytes then
// 1 MiB) lent a ring's rail 6.3 Mbit/s for its 191, whose shares were
// then too small to sample it again (16 KiB, below FlightMin), and ring
// allreduce of 1 MiB ran at 218-231 Mbit/s in 4 of 5 runs. A rail's own
// estimate takes them and corrects itself with its next shares; a pool
// lends them to connections that have no samples of their own.
const poolMinBytes = sender.FlightMin

// nics are the process's local interfaces by address.
var nics sync.Map // string (local IP) -> *nic

// nicOf returns the interface of connection nc: one per local IP address,
// or nil for loopback (emulated rails are all on it, each its own path)
// and for connections that are not TCP.
func nicOf(nc net.Conn) *nic {
	if nc == nil {
		return nil
	}
	a, ok := nc.LocalAddr().(*net.TCPAddr)
	if !ok || a.IP == nil || a.IP.IsLoopback() || a.IP.IsUnspecified() {
		return nil
	}
	v, _ := nics.LoadOrStore(a.IP.String(), &nic{})
	return v.(*nic)
}

// add takes a drain-rate sample at now (pollNow).
func (k *nic) add(now int64, rate float64) {
	k.mu.Lock()
	k.pool.Add(now, rate)
	k.mu.Unlock()
}

// rate is the pooled rate at now (pollNow), 0 if none is fresh.
func (k *nic) rate(now int64) float64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.pool.Rate(now)
}
